"""The ``python`` tool: model-written code runs in the Sandbox (see ``sandbox.py`` for the limits)."""

from __future__ import annotations

from typing import Any

from agentkit.tools.base import ToolResult
from agentkit.tools.sandbox import Sandbox, SandboxConfig


class PythonTool:
    """Run Python code and return what it prints (and the value of a final expression).

    One call = a fresh process, unless ``session_id`` is given: then globals persist across calls of that
    session (one session per trajectory) until ``close_session`` (the agent loop closes its sessions when its
    rollout returns) or until it idles out. Whoever holds a session id reaches its state: the agent loop names
    them by random ids.

    Args:
        config: the sandbox's limits (default: ``SandboxConfig()``: kernel isolation, 10 s wall…).
        sandbox: a sandbox to share (with other tools or a tool server) in place of a new one.
    """

    name = "python"
    description = (
        "Execute Python 3 code in a sandbox without network access and return its printed output. "
        "Use print() to show results."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source code to run"}},
        "required": ["code"],
    }

    def __init__(self, config: SandboxConfig | None = None, sandbox: Sandbox | None = None):
        self.sandbox = sandbox or Sandbox(config)

    def __call__(self, code: str = "", session_id: str | None = None, **extra: Any) -> ToolResult:
        if extra:
            return ToolResult(f"Error: unexpected argument(s) {', '.join(sorted(extra))}; pass only 'code'.", ok=False)
        if not isinstance(code, str) or not code.strip():
            return ToolResult("Error: 'code' must be a non-empty string of Python source.", ok=False)
        return self.sandbox.run(code, session_id=session_id)

    def close_session(self, session_id: str) -> None:
        """End a session: its worker, its globals and its files are gone (an unknown id is ignored)."""
        self.sandbox.close_session(session_id)

    def close(self) -> None:
        self.sandbox.close()
