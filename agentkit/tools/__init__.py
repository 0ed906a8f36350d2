"""Tools: the Tool protocol, the sandboxed ``python`` tool, and the ``agentkit.tools`` registry.

Third-party tools register under the ``agentkit.tools`` entry-point group, the same way the built-ins do.
"""

from agentkit.registry import Registry
from agentkit.tools.base import Tool, ToolResult, openai_schema

TOOLS: Registry = Registry("tool", group="agentkit.tools")


def build_tools(names: list[str], corpus=None, top_k: int = 3, corpus_option: str = "corpus") -> dict[str, Tool]:
    """Tools by registry name, checked before any is built: an unknown name is one error with a did-you-mean,
    and ``search`` needs ``corpus`` (a JSONL path, a dataset or rows of id, title, text) searched ``top_k`` deep;
    errors call the corpus by ``corpus_option`` (the caller's name for it, e.g. ``--corpus``). ``mcp:TARGET``
    adds every tool of an MCP server (``agentkit.tools.mcp``: a streamable-HTTP URL or a stdio command; the key
    for an HTTP server from ``AGENTKIT_MCP_API_KEY``).
    The one place a list of names becomes tools (``agentkit serve --tools``, recipes' ``tools`` keys)."""
    import os
    from pathlib import Path

    from agentkit.errors import AgentkitError

    if not names:
        raise AgentkitError("no tool named", "e.g. python,search")
    mcp = [n[len("mcp:") :] for n in names if n.startswith("mcp:")]
    names = [n for n in names if not n.startswith("mcp:")]
    for name in names:
        TOOLS.get(name)
    if "search" in names and corpus is None:
        raise AgentkitError(f"the search tool needs a {corpus_option}", "a JSONL file of {id, title, text}")
    if isinstance(corpus, (str, Path)) and not Path(corpus).is_file():
        raise AgentkitError(f"{corpus_option} {corpus} does not exist", "a JSONL file of {id, title, text}")
    tools = {name: TOOLS.get(name)(corpus, top_k=top_k) if name == "search" else TOOLS.get(name)() for name in names}
    for target in mcp:  # every tool of each MCP server, by the server's names for them
        from agentkit.tools.mcp import mcp_tools

        for name, tool in mcp_tools(target, api_key=os.environ.get("AGENTKIT_MCP_API_KEY")).items():
            if name in tools:
                raise AgentkitError(f"two tools are named {name!r} (mcp:{target} has one)", "serve one of them")
            tools[name] = tool
    return tools


__all__ = ["TOOLS", "Tool", "ToolResult", "build_tools", "openai_schema"]
