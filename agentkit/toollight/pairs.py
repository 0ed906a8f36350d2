"""Preference-pair selection for Tool-Light's DPO stages: declarative rules, every threshold in ``PairRules``.

The official repository does not release these rules (its README defers to the paper), so they are written
from the paper, Sec. 3.3; the source of each is named below. A sample is *correct* when the task's scorer says
so (the paper: F1 = 1). Candidates are the samples of one question (vanilla rollouts, or a main chain with its
entropy-guided branches).

**Difficulty** by the question's correct rate r: easy if r ≥ ``easy_at``, otherwise hard if r ≤ ``hard_at``,
otherwise the question gives no pair. Vanilla data: easy ≥ 70 %, hard ≤ 40 %; entropy-guided data:
easy ≥ 50 %, hard ≤ 50 % (r = 50 % counts as easy).

**Pre-aligned round** (Criterion 1):
- entropy-guided data: chosen = the correct sample with the fewest tool calls, ties to the lowest chain
  entropy (if none is correct, the SFT trajectory of the question, when given); rejected = a wrong sample with
  more tool calls than the chosen one (the most calls; ties to the highest entropy);
- vanilla data: chosen = the shortest correct sample (model tokens); rejected = a wrong sample that is longer
  or makes more calls (the longest; ties to more calls).

**Mixing:** hard : easy = 2 : 1 within each source, vanilla : entropy-guided = 13 : 7 overall; the largest
mix the available pairs allow, drawn with a seed.

**Self-evolved rounds** (Criterion 2), on samples of the current model: a question is hard when
#correct < ``self_evolved_hard_ratio`` · #wrong. Hard: chosen = the *longest* correct sample, rejected = the
*shortest* wrong one (this counters tool under-use). Easy: chosen = the correct sample with the fewest calls
and lowest entropy, rejected = the wrong sample with the most calls.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from agentkit.agent.trajectory import Trajectory
from agentkit.config import Fraction, PosFloat, PosInt, option
from agentkit.toollight.entropy import chain_entropy

Difficulty = Literal["easy", "hard"]


@dataclass
class PairRules:
    """Every threshold of the pair rules (the module docstring; the paper's values)."""

    vanilla_easy_at: Fraction = option(0.7, "vanilla data: a question is easy when its correct rate is at least this")
    vanilla_hard_at: Fraction = option(0.4, "vanilla data: hard when its correct rate is at most this")
    guided_easy_at: Fraction = option(0.5, "entropy-guided data: easy when the correct rate is at least this")
    guided_hard_at: Fraction = option(0.5, "entropy-guided data: hard when at most this (a tie counts as easy)")
    hard_to_easy: tuple[PosInt, PosInt] = option((2, 1), "pairs mixed from hard and easy questions within each source")
    vanilla_to_guided: tuple[PosInt, PosInt] = option((13, 7), "pairs mixed from vanilla and entropy-guided data")
    self_evolved_hard_ratio: PosFloat = option(
        0.5, "self-evolved rounds: a question is hard when #correct < this × #wrong"
    )

    def problems(self) -> list[str]:
        """Rules across fields (``agentkit.config.cross_checks``): an easy threshold below the hard one would call
        a question both."""
        return [
            f"{kind}_easy_at: {easy} is below {kind}_hard_at {hard}; easy needs a correct rate at least the hard one"
            for kind, easy, hard in (
                ("vanilla", self.vanilla_easy_at, self.vanilla_hard_at),
                ("guided", self.guided_easy_at, self.guided_hard_at),
            )
            if easy < hard
        ]


@dataclass
class Candidate:
    traj: Trajectory
    correct: bool

    @property
    def calls(self) -> int:
        return self.traj.tool_calls

    @property
    def length(self) -> int:
        return sum(self.traj.mask)  # tokens the model wrote

    @property
    def entropy(self) -> float:
        h = chain_entropy(self.traj)
        return h if h == h else 0.0


@dataclass
class Pair:
    chosen: Trajectory
    rejected: Trajectory
    rule: str
    difficulty: Difficulty


def difficulty(cands: list[Candidate], easy_at: float, hard_at: float) -> Difficulty | None:
    if not cands:
        return None
    rate = sum(c.correct for c in cands) / len(cands)
    return "easy" if rate >= easy_at else "hard" if rate <= hard_at else None


def pre_aligned_guided(cands: list[Candidate], rules: PairRules, sft: Trajectory | None = None) -> Pair | None:
    """The pre-aligned round's pair of one question's entropy-guided samples (Criterion 1, the module's rules).

    Args:
        cands: the question's samples (a main chain and its branches).
        rules: the thresholds (``guided_easy_at``, ``guided_hard_at``).
        sft: the question's SFT trajectory, chosen when no sample is correct.

    Returns:
        chosen = the correct sample with the fewest calls (ties: lowest entropy), rejected = the wrong one with
        the most calls beyond it; None when the question's correct rate gives no level or no such pair exists.
    """
    level = difficulty(cands, rules.guided_easy_at, rules.guided_hard_at)
    good = [c for c in cands if c.correct]
    if level is None or (not good and sft is None):
        return None
    chosen = min(good, key=lambda c: (c.calls, c.entropy)).traj if good else sft
    calls = chosen.tool_calls
    bad = [c for c in cands if not c.correct and c.calls > calls]
    if not bad:
        return None
    rejected = max(bad, key=lambda c: (c.calls, c.entropy)).traj
    return Pair(chosen, rejected, "pre_aligned_guided", level)


def pre_aligned_vanilla(cands: list[Candidate], rules: PairRules) -> Pair | None:
    """The pre-aligned round's pair of one question's vanilla samples (Criterion 1).

    Args:
        cands: the question's samples.
        rules: the thresholds (``vanilla_easy_at``, ``vanilla_hard_at``).

    Returns:
        chosen = the shortest correct sample, rejected = the longest wrong one that is longer or makes more
        calls; None when the correct rate gives no level or no such pair exists.
    """
    level = difficulty(cands, rules.vanilla_easy_at, rules.vanilla_hard_at)
    good = [c for c in cands if c.correct]
    if level is None or not good:
        return None
    best = min(good, key=lambda c: (c.length, c.calls))
    bad = [c for c in cands if not c.correct and (c.length > best.length or c.calls > best.calls)]
    if not bad:
        return None
    worst = max(bad, key=lambda c: (c.length, c.calls))
    return Pair(best.traj, worst.traj, "pre_aligned_vanilla", level)


def self_evolved(cands: list[Candidate], rules: PairRules) -> Pair | None:
    """A self-evolved round's pair of one question's samples of the current model (Criterion 2).

    Args:
        cands: the question's samples.
        rules: ``self_evolved_hard_ratio``: hard when #correct < ratio · #wrong.

    Returns:
        Hard: the longest correct sample against the shortest wrong one; easy: the correct one with the fewest
        calls and lowest entropy against the wrong one with the most calls; None without both kinds.
    """
    good = [c for c in cands if c.correct]
    bad = [c for c in cands if not c.correct]
    if not good or not bad:
        return None
    if len(good) < rules.self_evolved_hard_ratio * len(bad):
        chosen = max(good, key=lambda c: (c.length, -c.entropy))
        rejected = min(bad, key=lambda c: (c.length, c.calls))
        return Pair(chosen.traj, rejected.traj, "self_evolved_hard", "hard")
    chosen = min(good, key=lambda c: (c.calls, c.entropy))
    rejected = max(bad, key=lambda c: (c.calls, c.entropy))
    return Pair(chosen.traj, rejected.traj, "self_evolved_easy", "easy")


def mix(vanilla: list[Pair], guided: list[Pair], rules: PairRules, seed: int = 0) -> list[Pair]:
    """The largest sample with hard : easy and vanilla : guided at the configured ratios. A bucket with no pairs
    at all (e.g. no easy question among the guided samples) is left out and the others keep their ratios, rather
    than the whole mix coming out empty.

    Args:
        vanilla: the vanilla data's pairs.
        guided: the entropy-guided data's pairs.
        rules: the ratios (``hard_to_easy``, ``vanilla_to_guided``).
        seed: the draw's seed.

    Returns:
        The mixed pairs.
    """
    h, e = rules.hard_to_easy
    v, g = rules.vanilla_to_guided
    buckets = {
        (src, lvl): [p for p in pairs if p.difficulty == lvl]
        for src, pairs in (("vanilla", vanilla), ("guided", guided))
        for lvl in ("hard", "easy")
    }
    frac = {
        (src, lvl): (v if src == "vanilla" else g) / (v + g) * (h if lvl == "hard" else e) / (h + e)
        for src, lvl in buckets
    }
    full = [k for k in buckets if frac[k] > 0 and buckets[k]]
    if not full:
        return []
    total = min(len(buckets[k]) / frac[k] for k in full)
    r = random.Random(seed)
    out = []
    for k in full:
        out += r.sample(buckets[k], int(total * frac[k] + 1e-9))
    return out
