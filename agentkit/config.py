"""Layered typed configs: dataclass defaults < YAML file < ``--set a.b=value``.

Every layer is checked against the dataclass when the config is built, before anything runs: an unknown key
(with a did-you-mean that gives the full dotted key), a value of the wrong type, a value outside the range or
choices its annotation declares (``Annotated[int, Gt(0)]``, ``Literal[...]``, ``list[Literal[...]]``,
``Annotated[str, MinLen(1)]``, ``Annotated[str | None, EXISTING]``). Every problem is listed at once, in one
line, each naming its key and where the value came from (``file.yaml:LINE`` or ``--set key=value``). A
malformed YAML file is an error naming the file and line.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from pathlib import Path
from typing import Annotated, Any, TypeVar

import annotated_types as at
import yaml

from agentkit.errors import AgentkitError, did_you_mean
from agentkit.registry import import_target

C = TypeVar("C")
EXISTING = "existing path"  # Annotated marker: the value names a file or directory that exists


@dataclasses.dataclass(frozen=True)
class Problem:
    """Annotated marker: ``check`` (a ``"module:attr"`` target, imported when a value is checked) returns what is
    wrong with a value, or None."""

    check: str


MODEL = Problem("agentkit.models.catalog:model_problem")  # a catalog name, directory, .gguf or hub id (not loaded)

# The constraints configs use most (``from agentkit.config import PosInt``; annotated_types for the rest)
PosInt = Annotated[int, at.Gt(0)]
NonNegInt = Annotated[int, at.Ge(0)]
PosFloat = Annotated[float, at.Gt(0)]
NonNegFloat = Annotated[float, at.Ge(0)]
Fraction = Annotated[float, at.Interval(ge=0, le=1)]
TopP = Annotated[float, at.Interval(gt=0, le=1)]
NonEmptyStr = Annotated[str, at.MinLen(1)]
ExistingPath = Annotated["str | None", EXISTING]
ModelName = Annotated[str, at.MinLen(1), MODEL]


def option(default: Any = dataclasses.MISSING, help: str = "", internal: bool = False, **kwargs: Any) -> Any:
    """A config field with its help beside it, as TRL's ``field(metadata={"help": …})``.

    A mutable default (a list, dict or set, or a config dataclass) is copied for each instance.

    Args:
        default: the default value (none: the field is required).
        help: one or two sentences a user reads in ``--help``: what the setting does, its unit, what 0 or
            None means. It names other keys only to say how they interact.
        internal: set by code, not by configs (``SamplingParams.seeds``, one per prompt): left out of ``--help``
            and refused as a config key.
        **kwargs: passed on to ``dataclasses.field``.

    Returns:
        The dataclass field.

    Examples:
        >>> @dataclasses.dataclass
        ... class C:
        ...     n: PosInt = option(4, "trajectories per task")
        ...     kinds: list[str] = option(["mul"], "problem kinds")
        >>> C().kinds is C().kinds, dataclasses.fields(C)[0].metadata["help"]
        (False, 'trajectories per task')
    """
    metadata = {"help": help, "internal": internal}
    if isinstance(default, (list, dict, set)) or dataclasses.is_dataclass(default):
        value = default
        return dataclasses.field(default_factory=lambda: copy.deepcopy(value), metadata=metadata, **kwargs)
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


class Layer(dict):
    """A mapping of overrides that remembers where each dotted key came from (``file:line`` or ``--set``)."""

    def __init__(self, data: dict[str, Any] | None = None, where: dict[str, str] | None = None):
        super().__init__(data or {})
        self.where = where or {}


def _lines(node: yaml.Node, path: str, prefix: str, out: dict[str, str]) -> None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = f"{prefix}{k.value}"
            out[key] = f"{path}:{k.start_mark.line + 1}"
            _lines(v, path, key + ".", out)


# A config is small: larger files, longer scalars, deeper nesting, or aliases that expand past these are refused
# before they are built (a 1 KB "billion laughs" file of nested aliases expands to 10^9 nodes and hung the CLI).
MAX_YAML_BYTES = 1 << 20
MAX_YAML_NODES = 100_000
MAX_YAML_DEPTH = 64
MAX_YAML_SCALAR = 10_000


def _yaml_limits(node: yaml.Node | None) -> str | None:
    """What makes a composed YAML node tree too big to build, or None: its size with every alias expanded (counted
    once per node, so counting is linear), its depth, or a scalar's length."""
    if node is None:
        return None
    expanded: dict[int, int] = {}
    todo, order = [(node, 1)], []
    while todo:  # depth first, children before parents in ``order``
        n, depth = todo.pop()
        if depth > MAX_YAML_DEPTH:
            return f"nests deeper than {MAX_YAML_DEPTH} levels"
        if id(n) in expanded:
            continue
        expanded[id(n)] = 0
        order.append(n)
        if isinstance(n, yaml.ScalarNode) and len(n.value) > MAX_YAML_SCALAR:
            return f"has a value of {len(n.value)} characters (at most {MAX_YAML_SCALAR})"
        todo += [(k, depth + 1) for k in _children(n)]
    for n in reversed(order):
        expanded[id(n)] = 1 + sum(expanded.get(id(k), 1) for k in _children(n))
        if expanded[id(n)] > MAX_YAML_NODES:
            return f"expands to more than {MAX_YAML_NODES:,} values (aliases that repeat aliases?)"
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.ScalarNode):
        return []
    return [x for pair in node.value for x in pair] if isinstance(node, yaml.MappingNode) else node.value


def parse_yaml(text: str, where: str) -> tuple[Any, yaml.Node | None]:
    """YAML text → (data, node tree), with PyYAML's safe loader and the limits above; every failure is one
    ``AgentkitError`` naming ``where`` (a file, or a ``--set`` key)."""
    if len(text) > MAX_YAML_BYTES:
        raise AgentkitError(f"{where} has {len(text):,} characters; a config holds at most {MAX_YAML_BYTES:,}")
    loader = yaml.SafeLoader(text)
    try:  # one parse gives both the node tree (for the lines) and the data
        node = loader.get_single_node()
        problem = _yaml_limits(node)
        if problem:
            raise AgentkitError(f"{where} {problem}", "a config is a small mapping of keys and values")
        return (loader.construct_document(node) if node is not None else None), node
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise AgentkitError(f"malformed YAML at {at}: {problem}", "fix the syntax") from None
    except ValueError as e:  # a value PyYAML cannot build (an integer of more than 4,300 digits)
        raise AgentkitError(f"{where}: {str(e).splitlines()[0].split(';')[0]}") from None
    except RecursionError:
        raise AgentkitError(f"{where} nests too deeply") from None
    finally:
        loader.dispose()


def load_yaml(path: str | Path) -> Layer:
    """Read a YAML mapping; errors name the file and line, and so do later errors about its values."""
    path = Path(path)
    if not path.is_file():
        raise AgentkitError(f"config file {path} does not exist", "check the path")
    try:
        if (size := path.stat().st_size) > MAX_YAML_BYTES:
            raise AgentkitError(f"{path} has {size:,} bytes; a config holds at most {MAX_YAML_BYTES:,}")
        data, node = parse_yaml(path.read_text(encoding="utf-8"), str(path))
        data = data or {}
    except (OSError, UnicodeDecodeError) as e:
        raise AgentkitError(f"cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise AgentkitError(f"{path} must hold a mapping of config keys, not {type(data).__name__}")
    where: dict[str, str] = {}
    if node is not None:
        _lines(node, str(path), "", where)
    return Layer(data, where)


def _yaml_value(text: str, key: str) -> Any:
    try:
        return parse_yaml(text, f"--set {key}")[0]
    except AgentkitError as e:
        if "malformed YAML" not in e.message:
            raise
        raise AgentkitError(f"{key}: {text!r} is not a valid YAML list or mapping", "e.g. [a, b] or {k: v}") from None


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Convert ``value`` (from YAML or a ``--set`` string) to the annotated type ``tp``, or raise."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        base, *marks = typing.get_args(tp)
        value = _coerce(value, base, key)
        for m in marks:
            _check(value, m, key)
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
        raise AgentkitError(
            f"{key}: {value!r} is not allowed, {did_you_mean(str(value), map(str, typing.get_args(tp)))}"
        )
    if origin in (list, tuple):
        if isinstance(value, str):
            value = _yaml_value(value, key) if value.startswith("[") else [v for v in value.split(",") if v]
        if not isinstance(value, (list, tuple)):
            raise AgentkitError(f"{key}: expected a list, got {value!r}")
        args = typing.get_args(tp) or (Any,)
        if origin is tuple and len(args) > 1 and args[1] is not Ellipsis:  # tuple[int, int]: that many items
            if len(value) != len(args):
                raise AgentkitError(f"{key}: expected {len(args)} items, got {len(value)}")
            return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        return origin(_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # an item of a list of configs: a mapping
        return _coerce_dataclass(value, tp, key)
    if origin is dict:
        if isinstance(value, str):
            value = _yaml_value(value, key)
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


def _coerce_dataclass(value: Any, tp: type, key: str) -> Any:
    """A config dataclass from a mapping, each field coerced and checked (unknown and missing fields named)."""
    if isinstance(value, tp):
        return value
    if not isinstance(value, dict):
        raise AgentkitError(f"{key}: expected a mapping of {tp.__name__} fields, got {value!r}")
    if hasattr(tp, "VARIANT_KEY"):  # a list of engines: each item the class of its kind
        default = tp()
        tp = type(_as_variant(default, {tp.VARIANT_KEY: getattr(default, tp.VARIANT_KEY), **value}, f"{key}."))
    fields = {f.name: f for f in dataclasses.fields(tp)}
    for name in value:
        if name not in fields:
            raise AgentkitError(f"{key}: unknown field {name!r}, {did_you_mean(str(name), fields)}")
    for name, f in fields.items():
        if name not in value and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise AgentkitError(f"{key}.{name}: required")
    hints = _hints(tp)
    return tp(**{name: _coerce(v, hints[name], f"{key}.{name}") for name, v in value.items()})


_BOUNDS = (
    (at.Gt, "gt", ">", lambda v, b: v > b),
    (at.Ge, "ge", ">=", lambda v, b: v >= b),
    (at.Lt, "lt", "<", lambda v, b: v < b),
    (at.Le, "le", "<=", lambda v, b: v <= b),
)


def _check(value: Any, mark: Any, key: str) -> None:
    """Raise when ``value`` breaks one ``Annotated`` constraint (annotated_types bounds and lengths, EXISTING)."""
    if value is None:
        return
    for cls, attr, sign, ok in _BOUNDS:
        if isinstance(mark, cls) and not ok(value, getattr(mark, attr)):
            raise AgentkitError(f"{key}: must be {sign} {getattr(mark, attr)}, got {value!r}")
    if isinstance(mark, at.Interval):
        for cls, attr, _, _ in _BOUNDS:
            if getattr(mark, attr) is not None:
                _check(value, cls(getattr(mark, attr)), key)
    if isinstance(mark, at.MinLen) and len(value) < mark.min_length:
        raise AgentkitError(
            f"{key}: must not be empty"
            if mark.min_length == 1
            else f"{key}: needs at least {mark.min_length} items, got {len(value)}"
        )
    if isinstance(mark, at.Predicate) and not mark.func(value):
        raise AgentkitError(f"{key}: {value!r} is not {(mark.func.__doc__ or mark.func.__name__).strip()}")
    if mark == EXISTING and not Path(value).exists():
        raise AgentkitError(f"{key}: {value} does not exist")
    if isinstance(mark, Problem) and (problem := import_target(mark.check)(value)):
        raise AgentkitError(f"{key}: {problem}")


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def leaf_keys(cfg: Any, prefix: str = "") -> list[str]:
    """Every dotted key of a config dataclass (nested ones included)."""
    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        out.append(prefix + f.name)
        if dataclasses.is_dataclass(value):
            out += leaf_keys(value, f"{prefix}{f.name}.")
    return out


def apply_overrides(
    cfg: C,
    overrides: dict[str, Any],
    prefix: str = "",
    problems: list[str] | None = None,
    where: dict[str, str] | None = None,
    root: Any = None,
) -> C:
    """Return a copy of dataclass ``cfg`` with nested ``overrides`` applied and type-checked.

    Problems are appended to ``problems`` when given (so a caller can report them all), else the first raises.
    A config class may name keys it no longer has in ``RENAMED`` (old name → new dotted name, relative to it):
    an old key is then an error that names the new one. A config class with a ``VARIANT_KEY`` (a field naming
    its kind, e.g. ``EngineConfig.kind``) and a ``variant(name)`` class method becomes the named kind's class
    when a layer sets that field, keeping the values of the fields both share; a bare name stands for that field
    (``engine: vllm`` is ``engine: {kind: vllm}``).
    """
    raise_now = problems is None
    problems = [] if problems is None else problems
    where = getattr(overrides, "where", {}) if where is None else where
    root = cfg if root is None else root
    try:
        cfg = _as_variant(cfg, overrides, prefix)
    except AgentkitError as e:
        key = f"{prefix}{type(cfg).VARIANT_KEY}"  # type: ignore[attr-defined]
        problems.append(f"{e}{f' ({where[key]})' if key in where else ''}")
        overrides = {k: v for k, v in overrides.items() if k != type(cfg).VARIANT_KEY}  # type: ignore[attr-defined]
    fields = {f.name: f for f in dataclasses.fields(cfg)}  # type: ignore[arg-type]
    hints = _hints(type(cfg))
    changes: dict[str, Any] = {}
    for name, value in overrides.items():
        key = f"{prefix}{name}"
        at_ = f" ({where[key]})" if key in where else ""
        renamed = getattr(type(cfg), "RENAMED", {})
        if name not in fields and name in renamed:
            problems.append(f"{key}{at_} is now {prefix}{renamed[name]}: rename it (see --help)")
            continue
        if name in fields and fields[name].metadata.get("internal"):
            problems.append(f"{key}{at_}: set by code for each call, not by a config")
            continue
        if name not in fields:
            keys = leaf_keys(root)
            same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == name]  # right name, wrong level
            close = f"did you mean {same_leaf[0]!r}?" if same_leaf else did_you_mean(key, keys)
            problems.append(f"unknown config key {key!r}{at_}, {close}")
            continue
        current = getattr(cfg, name)
        kind_key = getattr(type(current), "VARIANT_KEY", None)
        if kind_key and isinstance(value, str):  # engine: vllm is engine.kind: vllm
            value = {kind_key: value}
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                problems.append(f"{key}: expected a mapping of {type(current).__name__} fields, got {value!r}{at_}")
                continue
            changes[name] = apply_overrides(current, value, f"{key}.", problems, where, root)
            continue
        try:
            changes[name] = _coerce(value, hints[name], key)
        except AgentkitError as e:
            problems.append(f"{e}{at_}")
    if raise_now and problems:
        raise AgentkitError(_joined(problems))
    return dataclasses.replace(cfg, **changes)  # type: ignore[type-var]


def _as_variant(cfg: Any, overrides: dict[str, Any], prefix: str) -> Any:
    """``cfg`` as the class of the kind ``overrides`` names in its ``VARIANT_KEY`` field (itself when none)."""
    key = getattr(type(cfg), "VARIANT_KEY", None)
    if key is None or key not in overrides:
        return cfg
    name = overrides[key]
    if not isinstance(name, str) or not name:
        raise AgentkitError(f"{prefix}{key}: expected a name, got {name!r}")
    try:
        cls = type(cfg).variant(name)
    except AgentkitError as e:
        raise AgentkitError(f"{prefix}{key}: {e}") from None
    if cls is type(cfg):
        return cfg
    shared = {f.name for f in dataclasses.fields(cls) if f.init} & {f.name for f in dataclasses.fields(cfg)}
    return cls(**{n: getattr(cfg, n) for n in shared - {key}})


def cross_checks(cfg: Any, prefix: str = "") -> list[str]:
    """The messages of every ``problems()`` method in a config and its nested configs: rules that involve
    several fields (a config returns e.g. ``["model: ..."]``; nested keys get their dotted prefix)."""
    out = [f"{prefix}{m}" for m in (cfg.problems() if callable(getattr(cfg, "problems", None)) else [])]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out += cross_checks(value, f"{prefix}{f.name}.")
    return out


def _joined(problems: list[str]) -> str:
    return problems[0] if len(problems) == 1 else f"{len(problems)} config problems: " + "; ".join(problems)


def parse_sets(items: list[str], flag: str = "--set") -> Layer:
    """``["a.b=1", "c=x"]`` → ``{"a": {"b": "1"}, "c": "x"}`` (values stay strings; typing happens later);
    errors name ``flag``, the option the items came from."""
    out = Layer()
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AgentkitError(f"{flag} {item!r} is not of the form key=value", "e.g. --set train.lr=1e-5")
        node: dict[str, Any] = out
        *parents, leaf = key.strip().split(".")
        if not all((*parents, leaf)):
            raise AgentkitError(f"{flag} {item!r}: the key has an empty part", "e.g. --set engine.model=NAME")
        for p in parents:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise AgentkitError(f"{flag} {item!r} conflicts with {flag} {p}={child}")
            node = child
        node[leaf] = value
        out.where[key.strip()] = f"{flag} {item}"
    return out


def build_config(cls: type[C], *layers: dict[str, Any], check: bool = True) -> C:
    """Dataclass defaults, then each layer in order (YAML mappings, then ``--set`` mappings); every problem of
    every layer is reported at once, in one ``AgentkitError``. ``check=False`` skips the rules across fields
    (``problems()``), for ``--help`` on a config that is not complete yet."""
    cfg, problems = cls(), []
    for layer in layers:
        cfg = apply_overrides(cfg, layer, problems=problems)
    if not problems and check:
        problems += cross_checks(cfg)
    if problems:
        raise AgentkitError(_joined(problems))
    return cfg


def to_dict(cfg: Any) -> dict[str, Any]:
    """A config as plain data (what ``config.yaml`` holds and ``--resume`` reads back): every field but those set
    by code (``option(internal=True)``), nested configs and lists of them included."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {
            f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if not f.metadata.get("internal")
        }
    if isinstance(cfg, (list, tuple)):
        return type(cfg)(to_dict(v) for v in cfg)
    if isinstance(cfg, dict):
        return {k: to_dict(v) for k, v in cfg.items()}
    return copy.deepcopy(cfg)


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False)


# ---- help: every key with its type, default and help (``agentkit run RECIPE --help``) ----------------------


def type_name(tp: Any) -> str:
    """A type annotation as a user reads it: ``int > 0``, ``hf | vllm``, ``list of (mul | chain)``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        base, *marks = args
        out = type_name(base)
        for m in marks:
            for cls, attr, sign, _ in _BOUNDS:
                if isinstance(m, cls):
                    out += f" {sign} {getattr(m, attr)}"
            if isinstance(m, at.Interval):
                lo = f"[{m.ge}" if m.ge is not None else f"({m.gt}"
                hi = f"{m.le}]" if m.le is not None else f"{m.lt})"
                out += f" in {lo}, {hi}"
            if isinstance(m, at.MinLen):
                out += ", not empty"
            if m == EXISTING:
                out += " (an existing path)"
        return out
    if origin is typing.Literal:
        return " | ".join(map(str, args))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin in (list, tuple):
        inner = type_name(args[0]) if args else "any"
        return f"list of ({inner})" if " " in inner else f"list of {inner}"
    if tp is type(None):
        return "None"
    return getattr(tp, "__name__", str(tp))


def describe(cfg: Any, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """``(dotted key, type, value, help)`` for every key of a config dataclass: a nested config first as its own
    row (type ``"section"``, value None, its field's help), then its keys. Fields set by code
    (``option(internal=True)``) are left out."""
    hints, out = _hints(type(cfg)), []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.metadata.get("internal"):
            continue
        doc = f.metadata.get("help", "")
        if dataclasses.is_dataclass(value):
            out.append((prefix + f.name, "section", None, doc))
            out += describe(value, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, type_name(hints[f.name]), value, doc))
    return out
