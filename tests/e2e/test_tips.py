"""TIPS potentials on the embedded models: the packed pass equals one pass per (state, answer) on SmolLM2 and on
Gemma 3 (sliding-window layers, states longer than its window), and a Gemma teacher scores a SmolLM2 policy's
trajectories in its own tokens."""

import math

from agentkit.engines.hf import HFEngine
from agentkit.eval.bench.tips_potentials import per_pair, workload
from agentkit.tips.potentials import PotentialScorer


def test_packed_potentials_equal_per_pair_on_smollm2(smol_engine):
    trajs, answers = workload(smol_engine, 3)
    scorer = PotentialScorer(smol_engine)
    got = scorer.potentials(trajs, answers)
    want = per_pair(smol_engine.variant(share_prefix=False), scorer, trajs, answers)
    assert [len(p) for p in got] == [4, 4, 4]
    assert max(abs(x - y) for p, q in zip(got, want) for x, y in zip(p, q)) < 1e-3


def test_gemma_teacher_for_a_smollm2_policy(smol_engine):
    """Gemma 3 tokenizes differently: each state is rebuilt in its tokens; its sliding-window layers (window 512)
    get their own mask, so the packed potentials equal the per-pair ones even where states are longer."""
    gemma = HFEngine("gemma3-270m", max_batch_size=4)
    trajs, answers = workload(smol_engine, 2)
    scorer = PotentialScorer(gemma, policy_tokens=smol_engine)
    got = scorer.potentials(trajs, answers)
    assert scorer.same_tokens(trajs[0]) is False
    states = [scorer._states(t) for t in trajs]
    assert max(len(s) for st in states for s in st) > gemma.model.config.get_text_config().sliding_window
    want = per_pair(gemma.variant(share_prefix=False), scorer, trajs, answers)
    assert all(math.isfinite(x) for p in got for x in p)
    assert max(abs(x - y) for p, q in zip(got, want) for x, y in zip(p, q)) < 1e-3
    # the gold answer becomes likelier as the searches find it (on average over the trajectories)
    assert sum(p[-1] for p in got) > sum(p[0] for p in got)
