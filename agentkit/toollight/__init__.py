"""Tool-Light (arXiv 2509.23285): SFT on tool-integrated trajectories, then entropy-guided self-evolved DPO.

This package holds the algorithm code; ``recipes/toollight`` runs the whole workflow (base → SFT → pre-aligned
DPO → self-evolved DPO rounds) and ``recipes/toollight_analyze`` the entropy analysis.

- ``sft_data``: a seeded generator of correct tag-style trajectories (the right tool call where a tool is
  needed, none where it is not) with real tool results;
- ``sft``: trajectories -> a tokenised dataset whose labels mask the prompt and every tool-result token, and
  supervised fine-tuning with TRL's ``SFTTrainer``;
- ``entropy``: per-token entropy at tool-result boundaries, chain entropy, the step score;
- ``sampling``: entropy-guided branching that continues from the cached prefix;
- ``pairs``: the Criterion-1 / Criterion-2 selectors and mixing, every threshold in ``PairRules``;
- ``dpo``: pairs as datasets (TRL conversational form + ids and tool masks) and DPO with tool tokens masked;
- ``rounds``: source mining, sampling, pair building and evaluation, the pieces of the outer loop.
"""
