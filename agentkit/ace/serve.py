"""ACE behind the OpenAI-compatible endpoint: ``agentkit serve --agent ace --playbook FILE [--learn]``.

Every chat request to the model ``agentkit/ace`` is answered by the generator with the playbook (or the
question's top-k bullets) in context; the answer is the message content, and the ``agentkit`` extension field
names the bullets used and the playbook version. With ``--learn``, a request may carry feedback in its
``agentkit`` extension field::

    extra_body={"agentkit": {"reference": "19.31 km"}}                    # labelled
    extra_body={"agentkit": {"feedback": {"correct": false, "text": "the unit test failed"}}}   # label-free

and the server reflects, curates and commits the deltas as a new playbook version (source ``serve``) before it
answers; ``usage`` then sums the generator's, reflector's and curator's calls. Concurrent requests generate in
one batch (the server's batcher); playbook updates take a lock, and the delta rules make each one a clean
batch whatever the order. Several server processes may learn into one playbook (behind a load balancer): the
store's inter-process lock makes each commit land on the newest version, and every request reads the versions
the others wrote before it answers or curates (``PlaybookStore.refresh``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from agentkit.ace.refine import Refiner, retrieve, touched
from agentkit.ace.roles import Curator, Generator, Reflector, RoleConfig, RoleStats, Sample
from agentkit.ace.store import PlaybookStore
from agentkit.data.tasks import Task
from agentkit.eval.metrics import score_task
from agentkit.server.http import RequestError

MODEL = "agentkit/ace"


def FeedbackError(message: str, param: str) -> RequestError:  # noqa: N802 - reads as the error it builds
    """A request's ``agentkit`` extension field is malformed: the server answers 400 naming ``param``."""
    return RequestError(400, message, param=param)


@dataclass
class Feedback:
    reference: str | None = None
    correct: bool | None = None
    text: str = ""
    metric: str = "em_f1"

    @classmethod
    def parse(cls, ext: Any) -> Feedback | None:
        """The request's ``agentkit`` object, or None when it carries no feedback."""
        if ext is None:
            return None
        if not isinstance(ext, dict):
            raise FeedbackError("agentkit must be an object", "agentkit")
        ref, fb, metric = ext.get("reference"), ext.get("feedback"), ext.get("metric", "em_f1")
        if ref is not None and (not isinstance(ref, str) or not ref.strip()):
            raise FeedbackError("agentkit.reference must be a non-empty string", "agentkit.reference")
        if metric not in ("numeric", "em_f1", "exact"):
            raise FeedbackError("agentkit.metric must be numeric, em_f1 or exact", "agentkit.metric")
        if fb is not None:
            if not isinstance(fb, dict) or not isinstance(fb.get("correct", None), (bool, type(None))):
                raise FeedbackError("agentkit.feedback must be {correct: bool, text: str}", "agentkit.feedback")
            if not isinstance(fb.get("text", ""), str):
                raise FeedbackError("agentkit.feedback.text must be a string", "agentkit.feedback.text")
        if ref is None and fb is None:
            return None
        fb = fb or {}
        return cls(ref, fb.get("correct"), fb.get("text", ""), metric)


class AceService:
    """What the server calls for ``agentkit/ace``: ``answer(engine, question, system, ext) -> (text, extension,
    usage)``, in a worker thread, with the server's batched engine."""

    def __init__(self, store: PlaybookStore, refiner: Refiner, roles: RoleConfig, learn: bool = False, top_k: int = 0):
        self.store, self.refiner, self.roles = store, refiner, roles
        self.learn, self.top_k = learn, top_k
        self.lock = threading.Lock()

    def context(self, question: str) -> tuple[str, set[str], int]:
        with self.lock:
            pb = self.store.refresh()  # another process (``agentkit ace rollback``) may have written since
            ids = retrieve(pb, self.refiner.cache, [question], self.top_k)[0] if self.top_k else None
            return pb.to_text(ids), set(pb.bullets) if ids is None else ids, pb.version

    def answer(self, engine, question: str, system: str, ext: Any) -> tuple[str, dict[str, Any], dict[str, int]]:
        feedback = Feedback.parse(ext)
        if feedback and not self.learn:
            raise FeedbackError("this server does not learn from feedback (start it with --learn)", "agentkit")
        gen = Generator(engine, self.roles)
        text, known, version = self.context(question)
        chat = gen.chat(question, text)
        if system:
            chat[0]["content"] += "\n\n" + system
        (obj,) = gen.call([chat])
        s = Sample(Task("request", question, (feedback.reference if feedback else None) or "", "", "em_f1"), text)
        s.read(obj, known)
        ext_out: dict[str, Any] = {"bullets_used": s.bullet_ids, "playbook_version": version, "reasoning": s.reasoning}
        stats = [gen.stats]
        if feedback:
            ext_out["learned"] = self._learn(engine, s, feedback, stats)
        total = RoleStats()
        for st in stats:
            total.add(st)
        usage = {"prompt_tokens": total.prompt_tokens, "completion_tokens": total.completion_tokens}
        return s.answer, ext_out, {**usage, "total_tokens": sum(usage.values()), "model_calls": total.calls}

    def _learn(self, engine, s: Sample, fb: Feedback, stats: list[RoleStats]) -> dict[str, Any]:
        if fb.correct is not None:
            s.correct = fb.correct
        elif fb.reference is not None:
            s.correct = bool(s.answer) and score_task(fb.metric, s.answer, fb.reference)["correct"] == 1.0
        s.feedback = fb.text
        refl, cur = Reflector(engine, self.roles), Curator(engine, self.roles)
        stats += [refl.stats, cur.stats]
        with self.lock:  # refreshed: another server process on the same file may have written since
            bullets = self.store.refresh().to_text(set(s.bullet_ids)) if s.bullet_ids else ""
        (s.reflection,) = refl.call([refl.chat(s, bullets, with_reference=fb.reference is not None)])
        deltas = s.tags()
        with self.lock:
            pb = self.store.refresh()
            chat = cur.chat(s, pb.to_text(), pb.stats(), self.refiner.cfg.budget_tokens)
            schema = cur.schema_for(pb)
        (obj,) = cur.call([chat], schema) if s.reflection else (None,)
        deltas += Curator.deltas(obj)[0]
        with self.lock:
            res = self.store.commit(deltas, source="serve")
            refined = self.refiner.refine(self.store, touched(res))
            return {
                "correct": s.correct,
                "version": self.store.playbook.version,
                "added": res.added,
                "applied": len(res.applied),
                "rejected": len(res.rejected),
                **{f"refine_{k}": v for k, v in refined.items()},
            }
