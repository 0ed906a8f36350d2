"""Code2Logic (arXiv 2505.13886, §3): a new game's Python file → task templates drafted by an LLM → tasks whose
answers the game's own code computes, each validated by running that code in the sandbox.

A template (``TEMPLATE_SCHEMA``, JSON; drafted under that schema as a structured-output constraint, so every draft
parses) has:

- ``setup``: Python run with the game file's names and ``rng`` (a seeded ``random.Random``): it builds the state and
  every value the question mentions (the data engine of the paper, in a few lines);
- ``question``: the question text, ``{name}`` placeholders filled from ``setup``'s variables;
- ``answer``: a Python expression over the same names, computed by the game's functions;
- ``kind``: the answer kind (``agentkit.gamerl.verifiers``), ``qa_type`` (GameQA's families) and ``name``.

Validation. Model-written code runs only in ``agentkit.tools.sandbox`` (kernel isolation): the game file, then the
template, one sandbox call per instance seed; then once more in a fresh process to recompute every answer. Each
instance's question and answer come back as the value of the call's ``result`` expression, over the sandbox's
result channel: the code runs in a process that holds no channel to the supervisor, so what the game file or the
template prints (a forged result line) is only output, and a value that is not two strings is that instance's
error. Whatever the code does, its values must pass every check below, which run outside the sandbox; a template
that cannot be validated at all is rejected with the reason and the run goes on. A task
is accepted when its setup and answer ran, every placeholder resolved, its answer reads as its kind (the verifier
accepts the gold), and the recomputation agrees; a template is accepted when every recomputation agrees (one that
differs marks the template as not deterministic, whatever its other instances did), it yields at least one task, its
answers are not all the same (a template that ignores the state is rejected) and its questions differ. Every
rejection carries its reason.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentkit.gamerl.games.base import QA_TYPES
from agentkit.gamerl.verifiers import KINDS, verify

TEMPLATE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,39}$"},
        "qa_type": {"enum": list(QA_TYPES)},
        "setup": {"type": "string", "maxLength": 1200},
        "question": {"type": "string", "maxLength": 600},
        "answer": {"type": "string", "maxLength": 300},
        "kind": {"enum": [k for k in KINDS if k not in ("grid", "choice")]},
    },
    "required": ["name", "qa_type", "setup", "question", "answer", "kind"],
    "additionalProperties": False,
}

EXAMPLE_GAME = '''def new_counter(rng):
    return rng.randint(0, 20)

def add(counter, k):
    return counter + k

def render(counter):
    return f"Counter: {counter}"'''

EXAMPLE_TEMPLATE = {
    "name": "value_after_adds",
    "qa_type": "StatePrediction",
    "setup": "state = new_counter(rng)\nk = rng.randint(1, 5)\ntext = render(state)",
    "question": "{text}\nWhat does the counter show after adding {k}?",
    "answer": "add(state, k)",
    "kind": "int",
}

DRAFT_PROMPT = """You write question templates for a game, given its Python code.
A template is JSON with: name, qa_type (StatePerception, StatePrediction or StrategyOptimization), setup (Python
that uses the game's functions and `rng` to make a state and the values the question uses), question (text with
{{placeholders}} naming setup's variables), answer (a Python expression computing the answer with the game's
functions), kind (int, number, coord, coords, set, sequence or text).

Example game:
```python
{example_game}
```
Example template:
{example_template}

Game:
```python
{game}
```
Write one new template for this game (a {qa_type} question)."""

# Runs inside the sandbox after the game file, for one instance: the seeded ``rng``, then the template's setup. The
# instance's question and answer are then computed by ``_c2l_result(question, answer)``, the call's ``result``
# expression: they come back as its value over the sandbox's result channel, never through what the code prints.
_PRELUDE = """
import random as _random
def _fmt(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, tuple) and all(isinstance(x, int) for x in v):
        return "(" + ", ".join(map(str, v)) + ")"
    if isinstance(v, (list, set, frozenset, tuple)):
        return ", ".join(_fmt(x) for x in (sorted(v) if isinstance(v, (set, frozenset)) else v)) or "none"
    return str(v)
def _c2l_result(question, answer):
    names = {{k: v for k, v in globals().items() if not k.startswith("_")}}
    return {{"question": question.format(**names), "answer": _fmt(eval(compile(answer, "answer", "eval"), globals()))}}
rng = _random.Random({seed})
exec(compile({setup!r}, "setup", "exec"))
"""


def _sandbox_config():
    from agentkit.tools.sandbox import SandboxConfig

    return SandboxConfig(cpu_s=10, wall_s=30, memory_mb=1024, max_output=20_000, pool_size=2)


@dataclass
class TemplateReport:
    """One template's validation: accepted or not, why not, and its tasks' verdicts."""

    template: dict[str, Any]
    accepted: bool
    reason: str
    tasks: list[dict[str, Any]] = field(default_factory=list)
    rejected_tasks: list[dict[str, Any]] = field(default_factory=list)


def _schema_problem(template: Any) -> str | None:
    if not isinstance(template, dict):
        return "not a JSON object"
    missing = [
        k for k in TEMPLATE_SCHEMA["required"] if not isinstance(template.get(k), str) or not template[k].strip()
    ]
    if missing:
        return f"missing or empty field {missing[0]!r}"
    if template["kind"] not in KINDS:
        return f"kind {template['kind']!r} is not one of {', '.join(KINDS)}"
    if template["qa_type"] not in QA_TYPES:
        return f"qa_type {template['qa_type']!r} is not one of {', '.join(QA_TYPES)}"
    return None


def run_instance(sandbox, game_source: str, template: dict[str, Any], seed: int) -> dict[str, Any]:
    """One instance of ``template``, computed in its own sandbox call: ``{seed, question, answer}``, or
    ``{seed, error}`` saying why not (an exception in the game file or the template, a limit, a value that is not
    two strings). The question and answer are the value of the call's result expression (``Sandbox.run(...,
    result=...)``): nothing the game or the template prints can stand in for them."""
    code = game_source + "\n" + _PRELUDE.format(seed=seed, setup=template["setup"])
    value, error = sandbox_value(sandbox, code, f"_c2l_result({template['question']!r}, {template['answer']!r})")
    if error is not None:
        return {"seed": seed, "error": error}
    if not (
        isinstance(value, dict) and isinstance(value.get("question"), str) and isinstance(value.get("answer"), str)
    ):
        return {"seed": seed, "error": "the result is not a question and an answer (strings)"}
    return {"seed": seed, "question": value["question"], "answer": value["answer"]}


def sandbox_value(sandbox, code: str, expr: str) -> tuple[Any, str | None]:
    """Run model-written ``code`` in the sandbox and hand back the value of ``expr`` over its result channel:
    ``(value, None)``, or ``(None, why)`` in a line: the sandbox failing (``the sandbox failed: …``), or the code's
    own error (the last line of its output). One call failing never ends the caller's run."""
    try:
        res = sandbox.run(code, result=expr)
    except Exception as e:  # noqa: BLE001 - the sandbox failing on one call must not end the run
        return None, f"the sandbox failed: {type(e).__name__}: {e}"[:300]
    if not res.ok:
        return None, (res.output.strip().splitlines() or ["no output"])[-1][:300]
    return res.meta.get("value"), None


def validate(sandbox, game_source: str, template: Any, game: str, instances: int = 8, seed: int = 0) -> TemplateReport:
    """Instantiate a template on several seeds by running the game's code, recompute every answer in a fresh
    process, and accept or reject each task and the template (see the module docstring).

    Args:
        sandbox: the ``Sandbox`` the game's code and the template run in.
        game_source: the game file's code.
        template: a draft (a dict following ``TEMPLATE_SCHEMA``; anything else is rejected with the reason).
        game: the game's name, kept in each task's metadata.
        instances: seeds to instantiate it on.
        seed: the first seed.

    Returns:
        The template's report: accepted or not, the reason, and its tasks.
    """
    problem = _schema_problem(template)
    if problem:
        return TemplateReport(template if isinstance(template, dict) else {"raw": template}, False, problem)
    seeds = [seed * 1000 + i for i in range(instances)]
    first = [run_instance(sandbox, game_source, template, s) for s in seeds]
    recomputed = {s: run_instance(sandbox, game_source, template, s) for s, r in zip(seeds, first) if "error" not in r}
    spec = {"kind": template["kind"]}
    accepted, rejected = [], []
    for r in first:
        reason = None
        if "error" in r:
            reason = r["error"]
        elif "{" in r["question"] and "}" in r["question"].split("{", 1)[1]:
            reason = "an unresolved {placeholder} in the question"
        elif not r["answer"].strip():
            reason = "empty answer"
        elif recomputed.get(r["seed"]) != r:
            reason = "the recomputed answer differs (the template is not deterministic given its seed)"
        else:
            entry = {"question": r["question"], "answer": r["answer"], "metadata": {"verify": spec}}
            if verify(f"<answer>{r['answer']}</answer>", entry).score != 1.0:
                reason = f"the answer {r['answer'][:60]!r} does not read as {template['kind']}"
        if reason:
            rejected.append({**r, "reason": reason})
        else:
            accepted.append(_entry(game, template, r))
    unstable = [t for t in rejected if t["reason"].startswith("the recomputed answer differs")]
    if unstable:  # a property of the template, not of one instance: a lucky instance must not let it through
        return TemplateReport(template, False, unstable[0]["reason"], [], rejected)
    if not accepted:
        reasons = Counter(t["reason"] for t in rejected)
        return TemplateReport(template, False, f"no valid task: {reasons.most_common(1)[0][0]}", [], rejected)
    if len(accepted) >= 4 and len({e["answer"] for e in accepted}) == 1:
        return TemplateReport(template, False, "every answer is the same: the template ignores the state", [], rejected)
    if len(accepted) >= 2 and len({e["question"] for e in accepted}) == 1:
        return TemplateReport(template, False, "every question is the same: it shows no state", [], rejected)
    return TemplateReport(template, True, "", accepted, rejected)


def _entry(game: str, template: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    """A validated task in the dataset shape (GameQA's fields, the answer kind to verify it)."""
    return {
        "question": r["question"] + "\nGive only the final answer inside <answer></answer>.",
        "answer": r["answer"],
        "metadata": {
            "source_dataset": f"code2logic:{game}",
            "source_index": r["seed"],
            "data_id": f"{game}-fill-{r['seed']}-{template['name']}",
            "game": game,
            "task": template["name"],
            "qa_type": template["qa_type"],
            "question_description": template["name"].replace("_", " "),
            "state": None,
            "options": [],
            "analysis": f"Computed by the game's code: {template['answer']} = {r['answer']}.",
            "verify": {"kind": template["kind"]},
        },
    }


def draft_templates(engine, game_source: str, n: int, temperature: float = 0.8, seed: int = 0) -> list[Any]:
    """Template drafts from a model, constrained to ``TEMPLATE_SCHEMA``.

    Args:
        engine: any Engine (one that cannot constrain still gets the schema in words).
        game_source: the game file's code, shown to the model.
        n: drafts, one per prompt, cycling through the QA types.
        temperature: the sampling temperature.
        seed: draft i samples with seed ``seed * 1000 + i``.

    Returns:
        The drafts: parsed dicts, or the text where it does not parse (``validate`` rejects it with the reason).
    """
    from agentkit.engines.base import SamplingParams
    from agentkit.engines.structured import Constraint

    prompts = [
        [
            {
                "role": "user",
                "content": DRAFT_PROMPT.format(
                    example_game=EXAMPLE_GAME,
                    example_template=json.dumps(EXAMPLE_TEMPLATE, indent=1),
                    game=game_source.strip(),
                    qa_type=QA_TYPES[i % len(QA_TYPES)],
                ),
            }
        ]
        for i in range(n)
    ]
    params = SamplingParams(
        temperature=temperature,
        max_tokens=400,
        seeds=[seed * 1000 + i for i in range(n)],
        constraint=Constraint.schema(TEMPLATE_SCHEMA),
    )
    drafts = []
    for out in engine.generate(prompts, params):
        try:
            drafts.append(json.loads(out[0].text))
        except json.JSONDecodeError:
            drafts.append(out[0].text)
    return drafts


@dataclass
class Code2LogicResult:
    game: str
    reports: list[TemplateReport]

    @property
    def counts(self) -> dict[str, int]:
        return {
            "templates": len(self.reports),
            "templates_accepted": sum(r.accepted for r in self.reports),
            "templates_rejected": sum(not r.accepted for r in self.reports),
            "tasks_accepted": sum(len(r.tasks) for r in self.reports),
            "tasks_rejected": sum(len(r.rejected_tasks) for r in self.reports),
        }

    def tasks(self) -> list[dict[str, Any]]:
        return [t for r in self.reports if r.accepted for t in r.tasks]

    def save(self, out: Path) -> None:
        """templates.jsonl (each draft, verdict, reason), tasks.jsonl (accepted tasks), summary.json."""
        from agentkit.files import atomic_write

        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "templates.jsonl", "".join(json.dumps(asdict(r)) + "\n" for r in self.reports))
        atomic_write(out / "tasks.jsonl", "".join(json.dumps(t) + "\n" for t in self.tasks()))
        reasons = Counter(r.reason for r in self.reports if not r.accepted)
        atomic_write(out / "summary.json", json.dumps({"game": self.game, **self.counts, "reasons": reasons}, indent=1))


def code2logic(
    engine,
    game_file: str | Path,
    drafts: int = 8,
    instances: int = 8,
    templates: Sequence[Any] = (),
    seed: int = 0,
    sandbox=None,
) -> Code2LogicResult:
    """Code2Logic on one game: draft templates with a model, then validate each by running the game's code.

    Args:
        engine: any Engine, the drafting model (unused when ``drafts`` is 0).
        game_file: a Python file of the game's code (its stem names the game).
        drafts: templates to draft.
        instances: seeds each template is instantiated on.
        templates: more templates to validate, e.g. hand-written ones.
        seed: the drafting and instantiation seed.
        sandbox: the ``Sandbox`` to run in (default: a fresh one, 10 s of CPU and 1 GiB per call).

    Returns:
        Every template's report and the accepted tasks (``tasks()``, ``save(dir)``).
    """
    from agentkit.tools.sandbox import Sandbox

    path = Path(game_file)
    source = path.read_text()
    game = path.stem
    found = list(templates) + (draft_templates(engine, source, drafts, seed=seed) if drafts else [])
    if sandbox is not None:
        return Code2LogicResult(game, [_validate_or_reject(sandbox, source, t, game, instances, seed) for t in found])
    with Sandbox(_sandbox_config()) as own:
        return Code2LogicResult(game, [_validate_or_reject(own, source, t, game, instances, seed) for t in found])


def _validate_or_reject(sandbox, source: str, template: Any, game: str, instances: int, seed: int) -> TemplateReport:
    """``validate``, with anything it did not foresee turned into that template's rejection (the others go on)."""
    try:
        return validate(sandbox, source, template, game, instances, seed)
    except Exception as e:  # noqa: BLE001
        shown = template if isinstance(template, dict) else {"raw": template}
        return TemplateReport(shown, False, f"validation failed: {type(e).__name__}: {e}"[:300])
