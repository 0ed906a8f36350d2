"""``agentkit tool-server search --corpus FILE [--retriever DIR]``: the search tool over HTTP (see agentkit.tool_servers.app)."""

from __future__ import annotations

from fastapi import FastAPI

from agentkit.tool_servers.app import build_app
from agentkit.tools.search import SearchTool


def create_app(
    corpus,
    mode: str = "bm25",
    top_k: int = 3,
    api_key: str | None = None,
    max_concurrency: int = 8,
    retriever: str | None = None,
) -> FastAPI:
    """``retriever``: a directory saved by the revela recipe (``retrievers/seed-N``) for dense / hybrid search."""
    tool = SearchTool(corpus, mode=mode, top_k=top_k, retriever=retriever)
    return build_app(tool, api_key=api_key, max_concurrency=max_concurrency)
