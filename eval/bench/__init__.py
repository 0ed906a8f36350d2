"""Benchmarks (`agentkit bench ...`)."""
