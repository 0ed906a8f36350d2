"""The package's import graph: no circles between modules, and no module imports a layer above its own.

Every import counts, a function's deferred ones too (they still tie the two modules together). Layers, lowest
first: the base (errors, files, config, registry, tracking…), the foundations (models, data, engines, tools), the
platform (agent, rl, server), the methods (each its own package, never importing another method), and the top
(cli, runner, recipe, testing, viewer), which may import anything.
"""

import ast
from pathlib import Path

import agentkit

ROOT = Path(agentkit.__file__).parent
METHODS = {"tips", "toollight", "ace", "revela", "uncertainty", "gamerl"}
LAYERS = [
    {"", "errors", "files", "jsontext", "registry", "argtypes", "config", "plots", "tracking"},
    {"models", "data", "engines", "tools", "command"},
    {"agent", "rl", "server"},
    METHODS,
    {"cli", "commands", "runner", "recipe", "testing", "viewer", "__main__"},
]


def _graph() -> dict[str, set[str]]:
    """module → the package modules it imports (a name resolved to the longest module it names)."""
    mods = {}
    for f in ROOT.rglob("*.py"):
        name = ".".join(("agentkit", *f.relative_to(ROOT).with_suffix("").parts))
        mods[name.removesuffix(".__init__")] = f

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for target in map(resolve, (n for n in names if n.startswith("agentkit."))):
                if target and target != m and not m.startswith(target + "."):  # a module's own packages aside
                    graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            if comp:
                out.append(sorted([v, *comp]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    return next(i for i, names in enumerate(LAYERS) if top in names)


def test_no_import_circles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_upward_or_sideways_imports():
    bad = []
    for m, deps in sorted(_graph().items()):
        for d in sorted(deps):
            method_to_method = _layer(m) == _layer(d) == 3 and m.split(".")[1] != d.split(".")[1]
            if _layer(d) > _layer(m) or method_to_method:
                bad.append(f"{m} -> {d}")
    assert bad == []


def test_every_top_level_name_has_a_layer():
    tops = {m.split(".")[1] if "." in m else "" for m in _graph()}
    assert tops - set().union(*LAYERS) == set()  # a new package: give it its layer in LAYERS
