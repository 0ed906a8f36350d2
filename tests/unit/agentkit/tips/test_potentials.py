"""Potentials Φ(s_k) on the tiny model: equal to scoring each (state, answer) on its own, one packed pass per
trajectory, the states the model acted from, other teachers' tokens, and bad input."""

import math

import pytest

from agentkit.agent.trajectory import Segment, Trajectory
from agentkit.errors import AgentkitError
from agentkit.tips.potentials import PotentialScorer, logsumexp, state_ends

PROMPT = [{"role": "user", "content": "Where was the founder of Zentrix born?"}]


def _traj(engine, parts, task_id="q0"):
    """A trajectory from (kind, text) parts, tokenized the way the agent loop records them."""
    segs = [Segment(kind, text, engine.tokenize(text)) for kind, text in parts]
    return Trajectory(task_id, PROMPT, engine.encode(PROMPT), segs)


TWO_CALLS = [
    ("model", "<search>Zentrix founder</search>"),
    ("tool", "\n<result>\nZentrix was founded by Vel Oskar.\n</result>\n"),
    ("model", "<search>Vel Oskar born</search>"),
    ("tool", "\n<result>\nVel Oskar was born in Drenholt.\n</result>\n"),
    ("model", "<answer>Drenholt</answer>"),
]


def test_state_ends(tiny_engine):
    assert state_ends(_traj(tiny_engine, TWO_CALLS)) == [0, 2, 4]
    assert state_ends(_traj(tiny_engine, TWO_CALLS[-1:])) == [0]  # no tool call: the prompt only
    assert state_ends(_traj(tiny_engine, TWO_CALLS[:2])) == [0]  # cut after a call the model never read
    assert state_ends(_traj(tiny_engine, [])) == [0]


@pytest.mark.parametrize("normalize", ["mean", "sum"])
def test_potentials_equal_one_score_per_pair(tiny_engine, normalize):
    plain = tiny_engine.variant(share_prefix=False)
    trajs = [_traj(tiny_engine, TWO_CALLS), _traj(tiny_engine, TWO_CALLS[-1:], "q1")]
    golds = [["Drenholt", "Drenholt city"], ["Kaldoria"]]
    before = tiny_engine.scored_tokens
    got = PotentialScorer(tiny_engine, normalize).potentials(trajs, golds)
    packed_tokens = tiny_engine.scored_tokens - before
    assert [len(p) for p in got] == [3, 1]
    t = trajs[0]
    ids = t.prompt_ids + t.completion_ids
    cut = [len(t.prompt_ids), len(t.prompt_ids) + sum(len(s.token_ids) for s in t.segments[:2])]
    cut.append(cut[1] + sum(len(s.token_ids) for s in t.segments[2:4]))
    for k, end in enumerate(cut):
        vals = []
        for a in golds[0]:
            (s,) = plain.score([ids[:end]], [f"<answer>{a}</answer>"])
            vals.append(sum(s.logprobs) / len(s.logprobs) if normalize == "mean" else sum(s.logprobs))
        assert got[0][k] == pytest.approx(logsumexp(vals), abs=1e-4)
    if normalize == "sum":  # the paper's Φ: log of the summed answer probabilities
        probs = [
            math.exp(sum(s.logprobs))
            for s in plain.score([ids[: cut[1]]] * 2, [f"<answer>{a}</answer>" for a in golds[0]])
        ]
        assert got[0][1] == pytest.approx(math.log(sum(probs)), abs=1e-4)
    # each trajectory's states were encoded once: far fewer tokens than one pass per (state, answer)
    per_pair = sum(2 * (end + len(tiny_engine.tokenize("<answer>Drenholt</answer>"))) for end in cut)
    assert packed_tokens < 0.5 * per_pair


class _OtherTokens:
    """A teacher that tokenizes differently (one id per character, offset): it must be given its own ids."""

    max_model_len = 4096

    def __init__(self):
        self.asked = []

    def encode(self, prompt):
        return [1] + self.tokenize(prompt[-1]["content"])

    def tokenize(self, text):
        return [ord(c) % 1000 + 2 for c in text]

    def score(self, contexts, continuations):
        from agentkit.engines.base import Scored

        self.asked += list(zip(contexts, continuations))
        return [Scored(list(c), [-0.5] * len(c)) for c in continuations]


def test_teacher_with_other_tokens_gets_its_own_ids(tiny_engine):
    teacher = _OtherTokens()
    t = _traj(tiny_engine, TWO_CALLS)
    pots = PotentialScorer(teacher, policy_tokens=tiny_engine).potentials([t], [["Drenholt"]])
    assert pots == [[pytest.approx(-0.5)] * 3]
    contexts = [c for c, _ in teacher.asked]
    want = teacher.encode(PROMPT) + teacher.tokenize(TWO_CALLS[0][1] + TWO_CALLS[1][1])
    assert contexts[1] == want  # s_1: the teacher's prompt ids, then each segment's text in its tokens
    assert contexts[0] == teacher.encode(PROMPT) and contexts[2][: len(want)] == want


def test_bad_input(tiny_engine):
    t = _traj(tiny_engine, TWO_CALLS)
    scorer = PotentialScorer(tiny_engine)
    with pytest.raises(AgentkitError, match="task 'q0' has no gold answer"):
        scorer.potentials([t], [[]])
    with pytest.raises(AgentkitError, match="more than the teacher's context"):
        scorer.potentials([t], [["x" * (tiny_engine.max_model_len + 5)]])
    with pytest.raises(ValueError, match="answer lists"):
        scorer.potentials([t], [])
    with pytest.raises(ValueError, match="normalize"):
        PotentialScorer(tiny_engine, "max")


def test_long_state_keeps_its_recent_tokens(tiny_engine):
    """A state longer than the teacher's context beside the answer keeps its most recent tokens."""
    long_result = ("tool", "\n<result>\n" + "data " * 400 + "\n</result>\n")
    t = _traj(tiny_engine, [TWO_CALLS[0], long_result, TWO_CALLS[-1]])
    small = tiny_engine.variant(max_model_len=256)
    (pots,) = PotentialScorer(small).potentials([t], [["Drenholt"]])
    assert len(pots) == 2 and all(math.isfinite(p) for p in pots)
