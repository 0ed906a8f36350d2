"""The built-in suites by name: the one place a suite name becomes tasks (recipes, benchmarks, ``--tasks``).

- ``arithmetic`` — suite (a): large-number arithmetic and algebra (numeric answers);
- ``arithmetic-easy`` — its small-number kinds (add, sub, small_mul), where small models are right part of the time;
- ``steps`` — four dependent operations, one tool call each (multi-turn rollouts for benchmarks);
- ``multihop`` — suite (b): multi-hop questions over a generated world, closed-book unless a search tool is given;
- ``multihop-open`` — the same questions with their supporting documents before the question;
- ``units`` — suite (c): unit conversions whose answer style only feedback teaches (exact-string scorer).

The i-th task of a suite depends only on (name, seed, i) and, for the multi-hop suites, on the world ``kb``.
"""

from __future__ import annotations

from agentkit.data.arithmetic import EASY_KINDS, arithmetic_suite
from agentkit.data.multihop import MultiHopKB
from agentkit.data.tasks import Task
from agentkit.data.units import units_suite
from agentkit.errors import AgentkitError, did_you_mean

SUITE_NAMES = ("arithmetic", "arithmetic-easy", "steps", "multihop", "multihop-open", "units")


def suite_tasks(name: str, n: int, seed: int = 0, kb: MultiHopKB | int = 0) -> list[Task]:
    """``n`` tasks of suite ``name``; ``kb`` is the multi-hop world or the seed that builds it."""
    if name not in SUITE_NAMES:
        raise AgentkitError(f"suite {name!r} is unknown", did_you_mean(name, SUITE_NAMES))
    if name == "arithmetic":
        return arithmetic_suite(n, seed)
    if name == "arithmetic-easy":
        return arithmetic_suite(n, seed, kinds=EASY_KINDS)
    if name == "steps":
        return arithmetic_suite(n, seed, kinds=("steps",))
    if name == "units":
        return units_suite(n, seed)
    if isinstance(kb, int):
        kb = MultiHopKB.build(kb)
    tasks = kb.questions(n, seed)
    if name == "multihop-open":
        docs = {d["id"]: d for d in kb.corpus()}
        tasks = [
            Task(
                t.id + "-open",
                "\n".join(f"{docs[i]['title']}: {docs[i]['text']}" for i in t.meta["support"])
                + f"\n\nQuestion: {t.question}",
                t.answer,
                t.kind,
                t.metric,
                t.meta,
            )
            for t in tasks
        ]
    return tasks
