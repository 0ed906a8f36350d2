"""The examples in the core modules' docstrings run."""

import doctest

import pytest

import agentkit.ace.playbook
import agentkit.ace.refine
import agentkit.ace.roles
import agentkit.data.units
import agentkit.engines.base
import agentkit.engines.decoder
import agentkit.engines.hf
import agentkit.engines.sampling
import agentkit.errors
import agentkit.eval.bench
import agentkit.eval.bench.revela
import agentkit.eval.ir_benchmarks
import agentkit.eval.metrics as metrics
import agentkit.eval.retrieval
import agentkit.eval.stats
import agentkit.gamerl.dataset
import agentkit.gamerl.gamegen
import agentkit.gamerl.reward
import agentkit.gamerl.verifiers
import agentkit.recipes.tips.recipe
import agentkit.registry
import agentkit.revela.attention
import agentkit.revela.data
import agentkit.rl.advantages
import agentkit.rl.buckets
import agentkit.rl.value
import agentkit.server.http
import agentkit.tips.advantages
import agentkit.tips.shaping
import agentkit.toollight.dpo
import agentkit.tools.parsers
import agentkit.tools.search


@pytest.mark.parametrize(
    "mod",
    [
        metrics,
        agentkit.eval.bench,
        agentkit.ace.playbook,
        agentkit.ace.refine,
        agentkit.ace.roles,
        agentkit.data.units,
        agentkit.engines.base,
        agentkit.engines.decoder,
        agentkit.engines.hf,
        agentkit.engines.sampling,
        agentkit.registry,
        agentkit.errors,
        agentkit.gamerl.dataset,
        agentkit.gamerl.reward,
        agentkit.gamerl.verifiers,
        agentkit.tools.parsers,
        agentkit.tools.search,
        agentkit.server.http,
        agentkit.eval.retrieval,
        agentkit.eval.stats,
        agentkit.eval.bench.revela,
        agentkit.eval.ir_benchmarks,
        agentkit.revela.attention,
        agentkit.revela.data,
        agentkit.rl.advantages,
        agentkit.rl.buckets,
        agentkit.rl.value,
        agentkit.tips.advantages,
        agentkit.tips.shaping,
        agentkit.recipes.tips.recipe,
        agentkit.gamerl.gamegen,
        agentkit.toollight.dpo,
    ],
)
def test_doctests(mod):
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0
