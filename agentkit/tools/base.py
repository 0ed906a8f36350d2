"""The Tool protocol: a name, a description, JSON-schema parameters, and a call that returns a ToolResult."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class ToolResult:
    """What a tool call produced. ``output`` is what the model sees; ``ok`` is False for errors it should see too.

    ``meta`` carries details for logs and traces (timings, limits hit, truncation), never shown to the model.
    """

    output: str
    ok: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the call's arguments (OpenAI "function.parameters")

    def __call__(self, **arguments: Any) -> ToolResult: ...

    def close(self) -> None:
        """Release what the tool holds (worker processes, connections); idempotent. Recipes' ``teardown`` and
        the servers call it, also when a run fails."""


def openai_schema(tool: Tool) -> dict[str, Any]:
    """The tool as an OpenAI ``tools`` entry.

    Args:
        tool: any Tool (``name``, ``description``, ``parameters``: a JSON schema of its arguments).

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"}}``.
    """
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }
