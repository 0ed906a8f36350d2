"""Lazy registries: names map to ``"module:attr"`` strings, imported only when used.

Built-ins register the same way third parties do (entry-point groups ``agentkit.recipes``,
``agentkit.tools``), so there is one source of truth per kind and nothing heavy is imported at start-up.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from agentkit.errors import AgentkitError, did_you_mean

T = TypeVar("T")


def import_target(target: str) -> Any:
    """Import ``"package.module:attr"`` (attr may be dotted)."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """A name → lazy target map with an optional entry-point group.

    >>> r = Registry("demo")
    >>> r.register("join", "os.path:join")
    >>> r.get("join")("a", "b")
    'a/b'
    """

    def __init__(self, kind: str, group: str | None = None):
        self.kind = kind
        self.group = group
        self._targets: dict[str, str] = {}
        self._loaded_eps = False

    def register(self, name: str, target: str) -> None:
        if name in self._targets and self._targets[name] != target:
            raise ValueError(f"{self.kind} {name!r} is already registered to {self._targets[name]}")
        self._targets[name] = target

    def _load_entry_points(self) -> None:
        if self._loaded_eps or self.group is None:
            return
        self._loaded_eps = True
        for ep in entry_points(group=self.group):
            self._targets.setdefault(ep.name, ep.value)

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._targets)

    def target(self, name: str) -> str:
        self._load_entry_points()
        if name not in self._targets:
            raise AgentkitError(f"unknown {self.kind} {name!r}", did_you_mean(name, self._targets))
        return self._targets[name]

    def get(self, name: str) -> T:
        return import_target(self.target(name))

    def __contains__(self, name: str) -> bool:
        self._load_entry_points()
        return name in self._targets
