"""agentkit.toollight.pairs: difficulty thresholds, pre-aligned and self-evolved pair rules, TRL-format round trip."""


def _cand(name, correct, calls, length, entropy=1.0):
    """A candidate with ``calls`` tool calls, ``length`` model tokens and constant entropy."""
    from agentkit.agent.trajectory import Segment, Trajectory
    from agentkit.toollight.pairs import Candidate

    segs = [Segment("model", name, [0] * length, entropies=[entropy] * length)]
    segs += [Segment("tool", "", [0]) for _ in range(calls)]
    return Candidate(Trajectory(name, [], [], segs), correct)


def test_difficulty_thresholds():
    from agentkit.toollight.pairs import PairRules, difficulty

    r = PairRules()
    mk = [_cand(str(i), i < 7, 1, 5) for i in range(10)]  # 70 % correct
    assert difficulty(mk, r.vanilla_easy_at, r.vanilla_hard_at) == "easy"
    assert difficulty(mk[3:], r.vanilla_easy_at, r.vanilla_hard_at) is None  # 4/7 = 57 %: between the two
    half = [_cand("a", True, 1, 5), _cand("b", False, 1, 5)]
    assert difficulty(half, r.guided_easy_at, r.guided_hard_at) == "easy"  # 50 % counts as easy
    assert difficulty(half[1:], r.guided_easy_at, r.guided_hard_at) == "hard"


def test_pre_aligned_rules():
    from agentkit.toollight.pairs import PairRules, pre_aligned_guided, pre_aligned_vanilla

    r = PairRules()
    cands = [
        _cand("c2", True, 2, 30, 0.5),
        _cand("c1-hi", True, 1, 40, 0.9),
        _cand("c1-lo", True, 1, 50, 0.2),
        _cand("w3", False, 3, 20, 0.1),
        _cand("w1", False, 1, 60, 2.0),
        _cand("w4", False, 4, 10, 0.3),
    ]
    p = pre_aligned_guided(cands, r)  # 3/6 correct: easy for guided data
    assert (p.chosen.task_id, p.rejected.task_id, p.difficulty) == ("c1-lo", "w4", "easy")
    assert pre_aligned_guided([_cand("w", False, 2, 5), _cand("w2", False, 0, 5)], r) is None  # nothing correct
    sft = _cand("sft", True, 1, 9).traj
    p = pre_aligned_guided([_cand("w", False, 2, 5), _cand("w2", False, 0, 5)], r, sft=sft)
    assert p.chosen is sft and p.rejected.task_id == "w" and p.difficulty == "hard"
    v = [
        _cand("short", True, 2, 10),
        _cand("long", True, 1, 30),
        *[_cand(f"w{i}", False, 1, 5 + 2 * i) for i in range(6)],
    ]  # wrong: 5 … 15 tokens, 1 call each
    p = pre_aligned_vanilla(v, r)  # 2/8 correct: hard; chosen: the shortest correct
    assert (p.chosen.task_id, p.rejected.task_id, p.difficulty) == ("short", "w5", "hard")  # rejected: the longest
    short_wrong = [_cand("short", True, 2, 10), *[_cand(f"w{i}", False, 1, 4) for i in range(4)]]
    assert pre_aligned_vanilla(short_wrong, r) is None  # no wrong sample is longer or makes more calls


def test_self_evolved_rules_and_mixing():
    from agentkit.toollight.pairs import Pair, PairRules, mix, self_evolved

    r = PairRules()
    hard = [
        _cand("c-short", True, 1, 10),
        _cand("c-long", True, 3, 40),
        *[_cand(f"w{i}", False, i, 20 + i) for i in range(6)],
    ]  # 2 correct < 0.5 * 6 wrong: hard
    p = self_evolved(hard, r)
    assert (p.chosen.task_id, p.rejected.task_id, p.rule) == ("c-long", "w0", "self_evolved_hard")
    easy = [
        _cand("c0", True, 0, 10, 0.5),
        _cand("c1", True, 1, 10),
        _cand("w2", False, 2, 10),
        _cand("w5", False, 5, 10),
    ]
    p = self_evolved(easy, r)
    assert (p.chosen.task_id, p.rejected.task_id, p.difficulty) == ("c0", "w5", "easy")
    assert self_evolved([_cand("c", True, 1, 5)], r) is None  # needs both a correct and a wrong sample

    t = _cand("x", True, 1, 5).traj
    vanilla = [Pair(t, t, "v", "hard")] * 40 + [Pair(t, t, "v", "easy")] * 40
    guided = [Pair(t, t, "g", "hard")] * 14 + [Pair(t, t, "g", "easy")] * 30
    out = mix(vanilla, guided, r, seed=0)
    count = {
        (p.rule, p.difficulty): sum(1 for q in out if (q.rule, q.difficulty) == (p.rule, p.difficulty)) for p in out
    }
    # guided-hard (14) limits the mix: 14 / (7/20 * 2/3) = 60 pairs: vanilla 26 hard + 13 easy, guided 14 + 7
    assert count == {("v", "hard"): 26, ("v", "easy"): 13, ("g", "hard"): 14, ("g", "easy"): 7}
    # no guided-easy pair at all: that bucket is left out, the other three keep their ratios
    out = mix(vanilla, guided[:14], r, seed=0)
    assert len(out) == 26 + 13 + 14 and {p.difficulty for p in out if p.rule == "g"} == {"hard"}
