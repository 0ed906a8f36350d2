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
template, for ``instances`` seeds in one call; then once more in a fresh process to recompute every answer. A task
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

# Runs inside the sandbox after the game file: every instance's question and answer, as one JSON line.
_RUNNER = """
import json as _json, random as _random
_T = _json.loads({template!r})
def _fmt(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, tuple) and all(isinstance(x, int) for x in v):
        return "(" + ", ".join(map(str, v)) + ")"
    if isinstance(v, (list, set, frozenset, tuple)):
        return ", ".join(_fmt(x) for x in (sorted(v) if isinstance(v, (set, frozenset)) else v)) or "none"
    return str(v)
_out = []
for _seed in {seeds!r}:
    _ns = dict(globals())
    _ns["rng"] = _random.Random(_seed)
    try:
        exec(compile(_T["setup"], "setup", "exec"), _ns)
        _q = _T["question"].format(**{{k: v for k, v in _ns.items() if not k.startswith("_")}})
        _a = _fmt(eval(compile(_T["answer"], "answer", "eval"), _ns))
        _out.append({{"seed": _seed, "question": _q, "answer": _a}})
    except Exception as _e:
        _out.append({{"seed": _seed, "error": type(_e).__name__ + ": " + str(_e)[:200]}})
print("@@RESULT@@" + _json.dumps(_out))
"""


def _sandbox_config():
    from agentkit.tools.sandbox import SandboxConfig

    return SandboxConfig(cpu_s=10, wall_s=30, memory_mb=1024, max_output=200_000, pool_size=1)


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


def run_template(sandbox, game_source: str, template: dict[str, Any], seeds: Sequence[int]) -> list[dict] | str:
    """The template's instances for ``seeds``, computed in the sandbox (a list of {seed, question, answer} or
    {seed, error}); a string says why the call itself failed (syntax error in the game, time or memory limit…)."""
    code = game_source + "\n" + _RUNNER.format(template=json.dumps(template), seeds=list(seeds))
    res = sandbox.run(code)
    text = res.output
    if "@@RESULT@@" not in text:
        return (text.strip().splitlines() or ["no output"])[-1][:300]
    return json.loads(text.split("@@RESULT@@", 1)[1].splitlines()[0])


def validate(sandbox, game_source: str, template: Any, game: str, instances: int = 8, seed: int = 0) -> TemplateReport:
    """Instantiate ``template`` on ``instances`` seeds by running the game's code, recompute every answer in a fresh
    process, and accept or reject each task and the template (see the module docstring)."""
    problem = _schema_problem(template)
    if problem:
        return TemplateReport(template if isinstance(template, dict) else {"raw": template}, False, problem)
    seeds = [seed * 1000 + i for i in range(instances)]
    first = run_template(sandbox, game_source, template, seeds)
    if isinstance(first, str):
        return TemplateReport(template, False, f"the code failed to run: {first}")
    again = run_template(sandbox, game_source, template, seeds)
    recomputed = {} if isinstance(again, str) else {r["seed"]: r for r in again}
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
    """``n`` template drafts from ``engine`` (any Engine), one per prompt, constrained to ``TEMPLATE_SCHEMA`` (an
    engine that cannot constrain still gets the schema in words; its output is parsed, failures kept as text)."""
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
    """Draft ``drafts`` templates for the game in ``game_file`` with ``engine`` (plus any given ``templates``, e.g.
    hand-written), and validate each by running the game's code in ``sandbox`` (default: a fresh one, 10 s of CPU
    and 1 GiB per call)."""
    from agentkit.tools.sandbox import Sandbox

    path = Path(game_file)
    source = path.read_text()
    game = path.stem
    found = list(templates) + (draft_templates(engine, source, drafts, seed=seed) if drafts else [])
    if sandbox is not None:
        return Code2LogicResult(game, [validate(sandbox, source, t, game, instances, seed) for t in found])
    with Sandbox(_sandbox_config()) as own:
        return Code2LogicResult(game, [validate(own, source, t, game, instances, seed) for t in found])
