"""Tool-Light (arXiv 2509.23285): SFT on tool-integrated trajectories, then entropy-guided self-evolved DPO.

This package holds the algorithm code; ``recipes/toollight_sft`` runs the SFT stage end to end.

- ``sft_data``: a seeded generator of correct tag-style trajectories (the right tool call where a tool is
  needed, none where it is not) with real tool results;
- ``sft``: trajectories -> a tokenised dataset whose labels mask the prompt and every tool-result token, and
  supervised fine-tuning with TRL's ``SFTTrainer``.
"""
