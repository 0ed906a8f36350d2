"""agentkit.config: layers, types, constraints, and errors that name the file, line and key."""

from dataclasses import dataclass, field
from typing import Annotated, Literal

import pytest
from annotated_types import Ge, Gt, MinLen

from agentkit.config import EXISTING, apply_overrides, build_config, load_yaml, parse_sets
from agentkit.errors import AgentkitError


@dataclass
class Inner:
    lr: float = 1e-3
    steps: int = 10


@dataclass
class Cfg:
    name: str = "x"
    flag: bool = False
    ratio: float | None = None
    kinds: list[str] = field(default_factory=lambda: ["a"])
    inner: Inner = field(default_factory=Inner)


def test_layers_apply_in_order(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("name: from_yaml\ninner:\n  steps: 20\n  lr: 0.5\n")
    cfg = build_config(Cfg, load_yaml(f), parse_sets(["inner.lr=2e-5", "flag=true", "kinds=a,b"]))
    assert cfg.name == "from_yaml"  # YAML over default
    assert cfg.inner.steps == 20  # YAML nested
    assert cfg.inner.lr == pytest.approx(2e-5)  # --set over YAML
    assert cfg.flag is True and cfg.kinds == ["a", "b"]
    assert Cfg().inner.lr == 1e-3  # defaults untouched


def test_optional_and_none():
    assert build_config(Cfg, {"ratio": "0.25"}).ratio == 0.25
    assert build_config(Cfg, {"ratio": "none"}).ratio is None


def test_unknown_key_did_you_mean():
    with pytest.raises(
        AgentkitError,
        match=r"unknown config key 'inner.stpes' \(--set inner.stpes=3\), "
        r"did you mean 'inner.steps'",
    ):
        build_config(Cfg, parse_sets(["inner.stpes=3"]))
    with pytest.raises(AgentkitError, match=r"unknown config key 'steps'.*did you mean 'inner.steps'"):
        build_config(Cfg, {"steps": 3})  # a nested key given at the top: the full dotted key is suggested


def test_wrong_type_names_key():
    with pytest.raises(AgentkitError, match=r"inner.steps: expected int, got 'many'"):
        build_config(Cfg, parse_sets(["inner.steps=many"]))
    with pytest.raises(AgentkitError, match="flag: expected true or false"):
        build_config(Cfg, {"flag": "maybe"})
    with pytest.raises(AgentkitError, match="expected int"):
        apply_overrides(Cfg(), {"inner": {"steps": 1.5}})
    with pytest.raises(AgentkitError, match="expected a mapping"):
        build_config(Cfg, {"inner": 3})


def test_malformed_yaml_names_file_and_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: ok\ninner:\n  steps: [1, 2\n  lr: 3\n")
    with pytest.raises(AgentkitError, match=r"malformed YAML at .*bad.yaml:\d+:\d+"):
        load_yaml(f)
    f.write_text("- a\n- b\n")
    with pytest.raises(AgentkitError, match="must hold a mapping"):
        load_yaml(f)


def test_bad_set_syntax():
    with pytest.raises(AgentkitError, match="key=value"):
        parse_sets(["novalue"])


@dataclass
class Bounded:
    n: Annotated[int, Gt(0)] = 4
    temperature: Annotated[float, Ge(0)] = 0.0
    kinds: list[Literal["mul", "chain"]] = field(default_factory=lambda: ["mul"])
    name: Annotated[str, MinLen(1)] = "x"
    data: Annotated[str | None, EXISTING] = None
    inner: Inner = field(default_factory=Inner)


def test_every_problem_at_once_with_file_and_line(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("n: 0\ninner:\n  stpes: 3\nkinds: [mul, divide]\n")
    with pytest.raises(AgentkitError) as e:
        build_config(Bounded, load_yaml(f), parse_sets(["temperature=-1", "name=", f"data={tmp_path}/none.jsonl"]))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("6 config problems: ")
    assert f"n: must be > 0, got 0 ({f}:1)" in msg
    assert f"unknown config key 'inner.stpes' ({f}:3), did you mean 'inner.steps'?" in msg
    assert f"kinds[1]: 'divide' is not allowed, choose one of: chain, mul ({f}:4)" in msg
    assert "temperature: must be >= 0, got -1.0 (--set temperature=-1)" in msg
    assert "name: must not be empty (--set name=)" in msg
    assert f"data: {tmp_path}/none.jsonl does not exist" in msg
    ok = build_config(Bounded, parse_sets(["n=2", "kinds=mul,chain", f"data={f}"]))
    assert ok.n == 2 and ok.kinds == ["mul", "chain"] and ok.data == str(f)


def test_malformed_sets():
    for bad, match in ((["a..b=1"], "empty part"), (["inner=1", "inner.lr=2"], "conflicts")):
        with pytest.raises(AgentkitError, match=match):
            parse_sets(bad)


@dataclass
class Item:
    name: str
    weight: Annotated[float, Gt(0)] = 1.0


@dataclass
class WithItems:
    items: list[Item] = field(default_factory=lambda: [Item("a")])


def test_lists_of_configs_from_yaml_and_set(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("items:\n  - {name: b, weight: 2}\n  - {name: c}\n")
    cfg = build_config(WithItems, load_yaml(f))
    assert cfg.items == [Item("b", 2.0), Item("c", 1.0)]
    cfg = build_config(WithItems, parse_sets(["items=[{name: d, weight: '0.5'}]"]))
    assert cfg.items == [Item("d", 0.5)]
    for value, message in [
        ("[{name: d, wieght: 2}]", r"items\[0\]: unknown field 'wieght', did you mean 'weight'"),
        ("[{weight: 2}]", r"items\[0\].name: required"),
        ("[{name: d, weight: -1}]", r"items\[0\].weight"),
        ("[d]", r"items\[0\]: expected a mapping of Item fields"),
    ]:
        with pytest.raises(AgentkitError, match=message):
            build_config(WithItems, parse_sets([f"items={value}"]))
