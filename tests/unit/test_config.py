from dataclasses import dataclass, field

import pytest

from agentkit.config import apply_overrides, build_config, load_yaml, parse_sets
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
    assert cfg.name == "from_yaml"          # YAML over default
    assert cfg.inner.steps == 20            # YAML nested
    assert cfg.inner.lr == pytest.approx(2e-5)  # --set over YAML
    assert cfg.flag is True and cfg.kinds == ["a", "b"]
    assert Cfg().inner.lr == 1e-3           # defaults untouched


def test_optional_and_none():
    assert build_config(Cfg, {"ratio": "0.25"}).ratio == 0.25
    assert build_config(Cfg, {"ratio": "none"}).ratio is None


def test_unknown_key_did_you_mean():
    with pytest.raises(AgentkitError, match=r"unknown config key 'inner.stpes'.*did you mean 'steps'"):
        build_config(Cfg, parse_sets(["inner.stpes=3"]))


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
