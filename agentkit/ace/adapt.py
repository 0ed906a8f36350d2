"""The ACE adaptation loop (the official ``_train_single_sample``, batched).

One step on a batch of questions:

1. **generate** every answer with the playbook in context (all of it, or each question's top-k bullets);
2. **judge**: the feedback gives a verdict (or None) and a text; with labels the reflector also sees the
   reference; label-free (the paper's setting) it sees only the feedback, and the feedback itself reads no
   reference (``SelfConsistency``: agreement among fresh samples). Evaluation always scores with the task's
   checker (``checker_feedback``), whatever adapted the playbook;
3. **reflect** on every sample; a wrong one is answered again with the reflection as notes and reflected on
   again, up to ``max_rounds`` reflections, stopping once judged right (official: 3);
4. **curate**: one curator call per sample; its operations, the reflections' bullet tags and the generator's
   citations (``used``) are merged as one batch (``agentkit.ace.deltas``: order-free, replayable) and
   committed as one version, tagged with the step;
5. **refine**: de-duplication and eviction (``agentkit.ace.refine``), as their own versions.

A step's playbook change is one log entry, so a run killed mid-step resumes from the last finished step
(``last_step``) and never applies a step's tags twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentkit.ace.deltas import apply_batch
from agentkit.ace.refine import Refiner, retrieve, touched
from agentkit.ace.roles import Curator, Generator, Reflector, RoleStats, Sample
from agentkit.ace.store import PlaybookStore
from agentkit.ace.toolgen import ToolGenerator
from agentkit.config import NonNegInt, PosInt
from agentkit.eval.metrics import normalize_answer, score_task, value_match

# (task, sample) -> (verdict: True / False / None for "no verdict", feedback text for the reflector); or an object
# whose judge(samples) sets every sample's correct and feedback at once (``SelfConsistency``)
Feedback = Callable[[Any, Sample], tuple[bool | None, str]]


def checker_feedback(task, s: Sample) -> tuple[bool | None, str]:
    """The task's scorer against the reference: what evaluation uses, and the labelled runs' verdict. It reads the
    reference, so it is not label-free feedback."""
    ok = bool(s.answer) and score_task(task.metric, s.answer, task.answer)["correct"] == 1.0
    return ok, "A checker accepted the answer." if ok else "A checker rejected the answer."


def judge(feedback, samples: list[Sample]) -> list[Sample]:
    """Set every sample's ``correct`` and ``feedback`` by ``feedback`` (a per-sample function, or an object with
    ``judge(samples)`` that sees the batch)."""
    if hasattr(feedback, "judge"):
        feedback.judge(samples)
    else:
        for s in samples:
            s.correct, s.feedback = feedback(s.task, s)
    return samples


class SelfConsistency:
    """Label-free verdicts by agreement (no reference is read): each answer is compared with ``n`` fresh answers
    to the same question with the same context, sampled at ``temperature``; it is judged right when it agrees
    (``value_match``: the same number) with more than half of the n + 1 answers, and the reflector is told how
    many agreed. Self-consistency is the label-free signal of Wang et al. 2023; ACE's label-free runs use the
    environment's execution feedback, which these question suites do not have beyond the tool's own errors (those
    are in the trajectory the reflector reads).

    Args:
        generator: answers the copies (``Generator`` or ``ToolGenerator``; give it sampling at ``temperature``).
        n: fresh answers per question.
    """

    def __init__(self, generator, n: int = 4):
        self.generator, self.n = generator, n
        self._calls = 0  # judgements so far: each draws fresh seeds (a question asked again in a later round)

    def judge(self, samples: list[Sample]) -> None:
        copies = [Sample(s.task) for s in samples for _ in range(self.n)]
        contexts = [s.context for s in samples for _ in range(self.n)]
        self.generator.answer(copies, contexts, known=set(), draws=self._draws(samples))
        for i, s in enumerate(samples):
            others = [c.answer for c in copies[i * self.n : (i + 1) * self.n]]
            agree = 1 + sum(bool(s.answer) and bool(o) and _same(s.answer, o) for o in others)
            s.correct = bool(s.answer) and agree > (self.n + 1) / 2
            s.feedback = (
                f"{agree} of {self.n + 1} independent attempts at this question gave this answer."
                if s.answer
                else "No answer was given."
            )

    def _draws(self, samples: list[Sample]) -> list[int]:
        self._calls += 1
        return [1 + self._calls * 1000 * self.n + i for i in range(len(samples) * self.n)]


def _same(a: str, b: str) -> bool:
    """Two answers agree: the same number (``value_match`` with one as the gold), else the same text."""
    if value_match(a, b) or value_match(b, a):
        return True
    return normalize_answer(a) == normalize_answer(b)


@dataclass
class AdaptConfig:
    """labels: the reflector sees the reference answer (False: label-free, feedback only). max_rounds: reflections
    per wrong sample, each but the last followed by a new answer (the official code: 3). curate_correct: also
    curate after right answers (official: every sample)."""

    labels: bool = True
    max_rounds: PosInt = 3
    curate_correct: bool = True
    top_k: NonNegInt = 0


class Adapter:
    """Generator, reflector and curator over a ``PlaybookStore``: ``answer(tasks)`` (evaluation) and
    ``step(tasks, step)`` (adaptation on one batch).

    Args:
        generator: answers with the playbook in context (``Generator``, or ``ToolGenerator`` for an agent).
        reflector: diagnoses each answer against the feedback.
        curator: turns reflections into delta operations on the playbook.
        store: the playbook and its delta log (every commit locked and recorded).
        refiner: grow-and-refine (deduplication, the token budget).
        cfg: labels, reflection rounds, what is curated, top-k retrieval (default: ``AdaptConfig()``).
        feedback: ``(task, sample) -> (verdict, text for the reflector)`` (default: the task's own checker).
    """

    def __init__(
        self,
        generator: Generator | ToolGenerator,
        reflector: Reflector,
        curator: Curator,
        store: PlaybookStore,
        refiner: Refiner,
        cfg: AdaptConfig | None = None,
        feedback: Feedback = checker_feedback,
    ):
        self.generator, self.reflector, self.curator = generator, reflector, curator
        self.store, self.refiner = store, refiner
        self.cfg = cfg or AdaptConfig()
        self.feedback = feedback

    @property
    def usage(self) -> dict[str, dict[str, int]]:
        return {r: vars(getattr(self, r).stats).copy() for r in ("generator", "reflector", "curator")}

    def contexts(self, tasks: list[Any]) -> list[str]:
        pb = self.store.playbook
        if not self.cfg.top_k or len(pb) <= self.cfg.top_k:
            return [pb.to_text()] * len(tasks)
        picks = retrieve(pb, self.refiner.cache, [t.question for t in tasks], self.cfg.top_k)
        return [pb.to_text(ids) for ids in picks]

    def answer(
        self,
        tasks: list[Any],
        notes: list[str] | None = None,
        samples: list[Sample] | None = None,
        feedback: Feedback = checker_feedback,
    ) -> list[Sample]:
        """Answer and judge.

        Args:
            tasks: the questions (ignored when ``samples`` is given).
            notes: per sample, the reflector's notes to answer with (a new round).
            samples: samples to answer again, in place.
            feedback: the judge (default the checker: evaluation; ``step`` passes the adapter's feedback).

        Returns:
            The samples, each with its answer, the playbook bullets it used, and the verdict.
        """
        samples = samples or [Sample(t) for t in tasks]
        ctx = self.contexts([s.task for s in samples])
        self.generator.answer(samples, ctx, notes, set(self.store.playbook.bullets))
        return judge(feedback, samples)

    def _reflect(self, samples: list[Sample]) -> None:
        pb = self.store.playbook
        chats = [
            self.reflector.chat(s, pb.to_text(set(s.bullet_ids)) if s.bullet_ids else "", self.cfg.labels)
            for s in samples
        ]
        for s, obj in zip(samples, self.reflector.call(chats)):
            s.reflection = obj

    def step(self, tasks: list[Any], step: int) -> dict[str, Any]:
        """Adapt on one batch: answer, reflect (up to ``max_rounds``, answering wrong ones again), tag the bullets
        used, curate, commit the deltas (recorded with ``step``), then grow-and-refine.

        Args:
            tasks: the batch's questions.
            step: the step's number, kept in the log (a resumed run starts after the last one).

        Returns:
            The step's accuracies (first and final), operations proposed, invalid and rejected, bullets added,
            what refinement did, the playbook's size and version.
        """
        samples = self.answer(tasks, feedback=self.feedback)
        first = [s.correct for s in samples]
        self._reflect(samples)
        for _ in range(1, self.cfg.max_rounds):
            wrong = [s for s in samples if s.correct is False and s.reflection]
            if not wrong:
                break
            self.answer([], [_notes(s.reflection) for s in wrong], wrong, self.feedback)
            self._reflect(wrong)
        deltas = [d for s in samples for d in s.tags()]
        # the curator sees the counters after this step's tags
        view = self.store.playbook.copy()
        apply_batch(view, deltas)
        curate = [s for s in samples if s.reflection and (self.cfg.curate_correct or s.correct is not True)]
        stats, text = view.stats(), view.to_text()
        budget = self.refiner.cfg.budget_tokens
        proposed = invalid = 0
        chats = [self.curator.chat(s, text, stats, budget) for s in curate]
        for obj in self.curator.call(chats, self.curator.schema_for(view)):
            ops, bad = Curator.deltas(obj)
            deltas += ops
            proposed, invalid = proposed + len(ops) + bad, invalid + bad
        res = self.store.commit(deltas, source="curator", meta={"step": step})
        refined = self.refiner.refine(self.store, touched(res))
        return {
            "step": step,
            "accuracy_first": _mean(first),
            "accuracy_final": _mean([s.correct for s in samples]),
            "ops_proposed": proposed,
            "ops_invalid": invalid,
            "ops_rejected": sum(d.op != "TAG" for d, _ in res.rejected),
            "bullets_added": len(res.added),
            **{f"refine_{k}": v for k, v in refined.items()},
            "bullets": len(self.store.playbook),
            "version": self.store.playbook.version,
        }

    def evaluate(self, tasks: list[Any]) -> dict[str, float]:
        return summary(self.answer(tasks))

    def last_step(self) -> int:
        """The last step whose curator batch is in the log (-1: none): a resumed run starts after it."""
        steps = [
            e["meta"]["step"] for e in self.store.entries if isinstance(e.get("meta"), dict) and "step" in e["meta"]
        ]
        return max(steps, default=-1)

    def total_usage(self) -> RoleStats:
        total = RoleStats()
        for r in (self.generator, self.reflector, self.curator):
            total.add(r.stats)
        return total


def _notes(reflection: dict[str, Any] | None) -> str:
    r = reflection or {}
    return "\n".join(
        f"{k.replace('_', ' ')}: {r[k]}"
        for k in ("error_identification", "correct_approach", "key_insight")
        if r.get(k)
    )


def summary(samples: list[Sample]) -> dict[str, float]:
    """accuracy (the feedback's verdicts), answered (an answer at all), value_accuracy (the number right whatever
    the format: ``value_match``)."""
    return {
        "accuracy": _mean([s.correct for s in samples]),
        "answered": _mean([bool(s.answer) for s in samples]),
        "value_accuracy": _mean([value_match(s.answer, s.task.answer) for s in samples]),
    }


def _mean(xs: list[Any]) -> float:
    vals = [float(bool(x)) for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else 0.0
