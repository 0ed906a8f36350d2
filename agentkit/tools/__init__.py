"""Tools: the Tool protocol, the sandboxed ``python`` tool, and the ``agentkit.tools`` registry.

Third-party tools register under the ``agentkit.tools`` entry-point group, the same way the built-ins do.
"""

from agentkit.registry import Registry
from agentkit.tools.base import Tool, ToolResult, openai_schema

TOOLS: Registry = Registry("tool", group="agentkit.tools")

__all__ = ["TOOLS", "Tool", "ToolResult", "openai_schema"]
