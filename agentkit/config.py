"""Layered typed configs: dataclass defaults < YAML file < ``--set a.b=value``.

Every layer is checked against the dataclass: an unknown key is an error with a did-you-mean, a value of
the wrong type is an error naming the key, and a malformed YAML file is an error naming the file and line.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from agentkit.errors import AgentkitError, did_you_mean

C = TypeVar("C")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise AgentkitError(f"config file {path} does not exist", "check the path")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise AgentkitError(f"malformed YAML at {where}: {problem}", "fix the file's syntax") from None
    if not isinstance(data, dict):
        raise AgentkitError(f"{path} must hold a mapping of config keys, not {type(data).__name__}")
    return data


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Convert ``value`` (from YAML or a ``--set`` string) to the annotated type ``tp``, or raise."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        if isinstance(value, str) and value.lower() in ("none", "null") and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except AgentkitError as e:
                errors.append(e)
        raise errors[-1]
    if origin is typing.Literal:
        if value in typing.get_args(tp):
            return value
        raise AgentkitError(f"{key}: {value!r} is not allowed", did_you_mean(str(value), map(str, typing.get_args(tp))))
    if origin in (list, tuple):
        if isinstance(value, str):
            value = yaml.safe_load(value) if value.startswith("[") else [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            raise AgentkitError(f"{key}: expected a list, got {value!r}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        return origin(_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if isinstance(value, str):
            value = yaml.safe_load(value)
        if not isinstance(value, dict):
            raise AgentkitError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on", "false", "no", "0", "off"):
            return value.lower() in ("true", "yes", "1", "on")
        raise AgentkitError(f"{key}: expected true or false, got {value!r}")
    if tp in (int, float):
        if isinstance(value, bool):
            raise AgentkitError(f"{key}: expected {tp.__name__}, got {value!r}")
        try:
            if isinstance(value, str):
                return tp(float(value)) if tp is int and "e" in value.lower() else tp(value)
            if tp is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            return tp(value)
        except ValueError:
            raise AgentkitError(f"{key}: expected {tp.__name__}, got {value!r}") from None
    if tp is str:
        if isinstance(value, (dict, list)):
            raise AgentkitError(f"{key}: expected a string, got {value!r}")
        return str(value)
    return value


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def apply_overrides(cfg: C, overrides: dict[str, Any], prefix: str = "") -> C:
    """Return a copy of dataclass ``cfg`` with nested ``overrides`` applied and type-checked."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}  # type: ignore[arg-type]
    hints = _hints(type(cfg))
    changes: dict[str, Any] = {}
    for name, value in overrides.items():
        key = f"{prefix}{name}"
        if name not in fields:
            raise AgentkitError(f"unknown config key {key!r}", did_you_mean(name, fields))
        current = getattr(cfg, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise AgentkitError(f"{key}: expected a mapping of {type(current).__name__} fields, got {value!r}")
            changes[name] = apply_overrides(current, value, prefix=f"{key}.")
        else:
            changes[name] = _coerce(value, hints[name], key)
    return dataclasses.replace(cfg, **changes)  # type: ignore[type-var]


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["a.b=1", "c=x"]`` → ``{"a": {"b": "1"}, "c": "x"}`` (values stay strings; typing happens later)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AgentkitError(f"--set {item!r} is not of the form key=value", "e.g. --set train.lr=1e-5")
        node = out
        *parents, leaf = key.strip().split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def build_config(cls: type[C], *layers: dict[str, Any]) -> C:
    """Dataclass defaults, then each layer in order (YAML mappings, then ``--set`` mappings)."""
    cfg = cls()
    for layer in layers:
        cfg = apply_overrides(cfg, layer)
    return cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False)
