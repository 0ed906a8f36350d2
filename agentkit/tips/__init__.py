"""TIPS (arXiv 2603.22293): turn-level information-potential reward shaping for search agents.

- ``potentials``: Φ(state) = log Σ_m p_teacher(gold answer m | state) after each turn's tool results, every
  (state, answer) of a batch scored in one ``Engine.score`` call with each trajectory encoded once;
- ``shaping``: r_k = α(γΦ_k − Φ_{k-1}) per turn, R − αΦ_final at the end (the return telescopes to R − αΦ_0),
  α fixed or set by the official controller, warm-up.

The multi-turn GRPO trainer these rewards feed is ``agentkit.rl``; the ``tips`` recipe runs it end to end.
"""
