"""agentkit: LLM agents and reasoning training, from the ICLR 2026 seed papers."""

__version__ = "0.1.0"
