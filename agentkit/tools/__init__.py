"""Tools: the Tool protocol, the sandboxed ``python`` tool, and the ``agentkit.tools`` registry.

Third-party tools register under the ``agentkit.tools`` entry-point group, the same way the built-ins do.
"""

from agentkit.registry import Registry
from agentkit.tools.base import Tool, ToolResult, openai_schema

TOOLS: Registry = Registry("tool", group="agentkit.tools")


def build_tools(names: list[str], corpus=None, top_k: int = 3, corpus_option: str = "corpus") -> dict[str, Tool]:
    """Tools by registry name, checked before any is built: an unknown name is one error with a did-you-mean,
    and ``search`` needs ``corpus`` (a JSONL path, a dataset or rows of id, title, text) searched ``top_k`` deep;
    errors call the corpus by ``corpus_option`` (the caller's name for it, e.g. ``--corpus``).
    The one place a list of names becomes tools (``agentkit serve --tools``, recipes' ``tools`` keys)."""
    from pathlib import Path

    from agentkit.errors import AgentkitError

    if not names:
        raise AgentkitError("no tool named", "e.g. python,search")
    for name in names:
        TOOLS.get(name)
    if "search" in names and corpus is None:
        raise AgentkitError(f"the search tool needs a {corpus_option}", "a JSONL file of {id, title, text}")
    if isinstance(corpus, (str, Path)) and not Path(corpus).is_file():
        raise AgentkitError(f"{corpus_option} {corpus} does not exist", "a JSONL file of {id, title, text}")
    return {name: TOOLS.get(name)(corpus, top_k=top_k) if name == "search" else TOOLS.get(name)() for name in names}


__all__ = ["TOOLS", "Tool", "ToolResult", "build_tools", "openai_schema"]
