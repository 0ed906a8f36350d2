"""The examples in the extras' docstrings run."""

import doctest

import pytest

import agentkit.extras.data
import agentkit.extras.efficiency.orderdp.selection
import agentkit.extras.nets
import agentkit.extras.physics.atom.md
import agentkit.extras.physics.atom.model
import agentkit.extras.report
import agentkit.extras.robust.hdro.loss
import agentkit.extras.robust.nat.attack
import agentkit.extras.scene.foremamba3d.model
import agentkit.extras.scene.foremamba3d.recipe
import agentkit.extras.scene.foremamba3d.scenes
import agentkit.extras.scene.megs2.colour
import agentkit.extras.scene.megs2.model
import agentkit.extras.scene.megs2.prune
import agentkit.extras.scene.megs2.render
import agentkit.extras.scene.megs2.s2fit
import agentkit.extras.scene.megs2.scenes
import agentkit.extras.tabular.jarf.model
import agentkit.extras.video.astraea.model
import agentkit.extras.vision.relayformer.model
import agentkit.extras.vision.svg.model
import agentkit.extras.world.lpwm.dlp
import agentkit.extras.world.lpwm.dynamics
import agentkit.extras.world.lpwm.sprites


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
        agentkit.extras.physics.atom.md,
        agentkit.extras.physics.atom.model,
        agentkit.extras.scene.foremamba3d.model,
        agentkit.extras.scene.foremamba3d.recipe,
        agentkit.extras.scene.foremamba3d.scenes,
        agentkit.extras.scene.megs2.colour,
        agentkit.extras.scene.megs2.model,
        agentkit.extras.scene.megs2.prune,
        agentkit.extras.scene.megs2.render,
        agentkit.extras.scene.megs2.s2fit,
        agentkit.extras.scene.megs2.scenes,
        agentkit.extras.world.lpwm.dlp,
        agentkit.extras.world.lpwm.dynamics,
        agentkit.extras.world.lpwm.sprites,
    ],
)
def test_doctests(mod):
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0
