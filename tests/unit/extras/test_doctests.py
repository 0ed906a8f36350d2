"""The examples in the extras' docstrings run."""

import doctest

import pytest

import agentkit.extras.data
import agentkit.extras.efficiency.orderdp.selection
import agentkit.extras.nets
import agentkit.extras.report
import agentkit.extras.robust.hdro.loss
import agentkit.extras.robust.nat.attack
import agentkit.extras.tabular.jarf.model
import agentkit.extras.video.astraea.model
import agentkit.extras.vision.relayformer.model
import agentkit.extras.vision.svg.model


@pytest.mark.parametrize(
    "mod",
    [
        agentkit.extras.report,
        agentkit.extras.tabular.jarf.model,
        agentkit.extras.efficiency.orderdp.selection,
        agentkit.extras.robust.hdro.loss,
        agentkit.extras.robust.nat.attack,
        agentkit.extras.data,
        agentkit.extras.vision.svg.model,
        agentkit.extras.vision.relayformer.model,
        agentkit.extras.nets,
        agentkit.extras.video.astraea.model,
    ],
)
def test_doctests(mod):
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0
