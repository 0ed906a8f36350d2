"""``agentkit tool-server python``: the sandboxed python tool over HTTP (see agentkit.tool_servers.app)."""

from __future__ import annotations

from fastapi import FastAPI

from agentkit.tool_servers.app import build_app
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig


def create_app(config: SandboxConfig | None = None, api_key: str | None = None, max_concurrency: int = 8) -> FastAPI:
    tool = PythonTool(config or SandboxConfig(pool_size=max(2, max_concurrency // 2)))
    app = build_app(tool, api_key=api_key, max_concurrency=max_concurrency)
    app.router.on_shutdown.append(tool.close)
    return app
