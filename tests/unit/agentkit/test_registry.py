"""agentkit.registry: lazy targets, errors with did-you-mean, entry points."""

import pytest

from agentkit.errors import AgentkitError
from agentkit.registry import Registry
from agentkit.runner import RECIPES


def test_lazy_target_and_errors():
    r = Registry("widget")
    r.register("join", "os.path:join")
    assert r.get("join")("a", "b") == "a/b"
    with pytest.raises(AgentkitError, match="unknown widget 'jion'.*did you mean 'join'"):
        r.get("jion")
    with pytest.raises(ValueError, match="already registered"):
        r.register("join", "os.path:split")


def test_recipes_come_from_entry_points():
    assert "quickstart" in RECIPES.names()
    assert RECIPES.get("quickstart").name == "quickstart"
    with pytest.raises(AgentkitError, match="did you mean 'quickstart'"):
        RECIPES.get("quikstart")
