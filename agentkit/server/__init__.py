"""OpenAI-compatible server: protocol.py (requests), chat.py (logic), serving.py (batching), router.py (HTTP)."""

from agentkit.server.router import create_app

__all__ = ["create_app"]
