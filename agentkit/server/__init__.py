"""OpenAI-compatible server, laid out as vLLM's entrypoints: ``protocol.py`` (request, response and chunk
models), ``base.py`` (``OpenAIServing``: engine, batcher, agents, limits, shared checks), ``routes/`` (one module per
route family), ``chat.py`` (chat logic without HTTP), ``agents.py`` (agent models), ``streaming.py`` (SSE),
``serving.py`` (the batcher), ``http.py`` (errors, auth, checked bodies), ``app.py`` (``create_app``)."""

from agentkit.server.app import create_app

__all__ = ["create_app"]
