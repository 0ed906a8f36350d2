"""Metrics, scorers and the benchmark harness; installed as agentkit.eval."""
