"""Multi-turn agent RL: rollouts through ``agentkit.agent``, per-token advantages, TRL's GRPO losses.

- ``advantages``: per-turn rewards of groups of trajectories -> per-turn advantages (registered estimators:
  outcome GRPO, Dr. GRPO, TIPS' segment estimator);
- ``trainer``: ``AgentGRPOTrainer``, TRL's ``GRPOTrainer`` fed by the agent loop with per-token advantages and
  tool-result tokens masked (TIPS and Game-RL train with it).
"""
