"""Task suites: seeded, deterministic generators and loaders.

- ``arithmetic_suite`` — suite (a), arithmetic and algebra with large numbers (numeric answers);
- ``multihop_suite`` / ``MultiHopKB`` — suite (b), multi-hop QA over a generated world with its corpus;
- ``suite_tasks(name, n, seed)`` — any built-in suite by name (``SUITE_NAMES``).

Scorers live in ``agentkit.eval.metrics`` (``score_task`` dispatches on ``Task.metric``).
"""

from agentkit.data.arithmetic import arithmetic_suite
from agentkit.data.multihop import MultiHopKB, multihop_suite
from agentkit.data.suites import SUITE_NAMES, suite_tasks
from agentkit.data.tasks import Task, read_jsonl, write_jsonl

__all__ = [
    "SUITE_NAMES",
    "MultiHopKB",
    "Task",
    "arithmetic_suite",
    "multihop_suite",
    "read_jsonl",
    "suite_tasks",
    "write_jsonl",
]
