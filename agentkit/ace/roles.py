"""ACE's three roles as prompts with JSON answers, batched through any Engine.

- **Generator** → ``{reasoning, bullet_ids, final_answer}``: answers with the playbook (or its top-k bullets) in
  context and names the bullets it used. With tools it runs the agent loop instead (``agentkit.agent``), the
  playbook in the system prompt; the bullets used are the ids its turns cite.
- **Reflector** → ``{error_identification, root_cause_analysis, correct_approach, key_insight, bullet_tags}``:
  what went wrong and a helpful / harmful / neutral tag for each bullet the generator used. It sees the
  reference answer, or in the label-free variant only the execution feedback (a verifier's verdict, tool
  errors), never the reference.
- **Curator** → ``{reasoning, operations}``: delta operations (``agentkit.ace.deltas``) for the playbook.

Every call asks for JSON under a schema: engines that take a ``Constraint`` (all of ours; for a remote server,
one that accepts vLLM's ``structured_outputs``) decode under it, so the answer parses. Without it, the text is
parsed, repaired (``json_repair``: a missing brace, a trailing comma, prose around the object), retried with a
new seed, and at last skipped and counted (``RoleStats.failed``), never a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, ClassVar

import annotated_types as at

from agentkit.ace.playbook import SECTIONS
from agentkit.config import PosFloat, PosInt, option
from agentkit.engines.base import SamplingParams
from agentkit.engines.structured import Constraint

Message = dict[str, str]


@dataclass
class RoleConfig:
    """How the roles sample their JSON answers (the reflector's and curator's, and the generator's without a tool).

    Each answer is drawn with ``sampling`` (trajectory i of call c seeded ``seed + 7919 c + i``); an answer that
    does not parse after repair is drawn again, up to ``retries`` times, at ``retry_temperature`` (a greedy
    retry would repeat it).
    """

    RENAMED: ClassVar[dict[str, str]] = {k: f"sampling.{k}" for k in ("max_tokens", "temperature", "seed")}

    structured: bool = option(True, "decode under the role's JSON schema (off: free text, parsed and repaired)")
    max_chars: PosInt | None = option(
        None,
        "caps every string of the schema (None: its own caps, which fit ~400 tokens of a 4-characters-per-token "
        "tokenizer; a smaller tokenizer or max_tokens needs smaller caps, or answers are cut and fail)",
    )
    retries: Annotated[int, at.Interval(ge=0, le=10)] = option(1, "new samples for an answer that still does not parse")
    sampling: SamplingParams = option(
        SamplingParams(max_tokens=384, temperature=0.0, seed=0), "how each answer is sampled (max_tokens per answer)"
    )
    retry_temperature: PosFloat = option(0.7, "the temperature of retries")

    def problems(self) -> list[str]:
        """Rules across fields (``agentkit.config.cross_checks``)."""
        return (
            [] if self.sampling.seed is not None else ["sampling.seed: the roles need a seed (their retries offset it)"]
        )


@dataclass
class RoleStats:
    """Calls and tokens of a role (the ACE cost), and what became of its JSON."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repaired: int = 0
    retried: int = 0
    failed: int = 0

    def add(self, other: RoleStats) -> None:
        for k, v in vars(other).items():
            setattr(self, k, getattr(self, k) + v)


def _str(max_len: int, min_len: int = 0) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_len, **({"minLength": min_len} if min_len else {})}


# a bullet id as the playbook writes them (``calc-00012``): under a schema a model cannot invent other shapes
BULLET_ID = {"type": "string", "pattern": "^[a-z][a-z0-9]{0,7}-[0-9]{5}$"}
CONTENT = _str(300, 12)  # a strategy is a sentence, not "A"

GENERATOR_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": _str(800),
        "bullet_ids": {"type": "array", "items": BULLET_ID, "maxItems": 8},
        "final_answer": _str(120),
    },
    "required": ["reasoning", "bullet_ids", "final_answer"],
}
REFLECTOR_SCHEMA = {
    "type": "object",
    "properties": {
        "error_identification": _str(300),
        "root_cause_analysis": _str(300),
        "correct_approach": _str(300),
        "key_insight": _str(300),
        "bullet_tags": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": BULLET_ID, "tag": {"enum": ["helpful", "harmful", "neutral"]}},
                "required": ["id", "tag"],
            },
            "maxItems": 8,
        },
    },
    "required": ["error_identification", "root_cause_analysis", "correct_approach", "key_insight", "bullet_tags"],
}


def _op(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"type": {"const": kind}, **fields}, "required": ["type", *fields]}


# one shape per operation, each with the fields it needs (``Delta.parse``'s rules), so an operation decoded under
# the schema is a valid one: a small model otherwise writes {"type": "ADD"} and stops
CURATOR_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": _str(400),
        "operations": {
            "type": "array",
            "items": {
                "anyOf": [
                    _op("ADD", section={"enum": list(SECTIONS)}, content=CONTENT),
                    _op("UPDATE", id=BULLET_ID, content=CONTENT),
                    _op(
                        "MERGE",
                        ids={"type": "array", "items": BULLET_ID, "minItems": 2, "maxItems": 4},
                        content=CONTENT,
                    ),
                    _op("REMOVE", id=BULLET_ID),
                ]
            },
            "maxItems": 4,
        },
    },
    "required": ["reasoning", "operations"],
}


def capped(schema: Any, max_chars: int | None) -> Any:
    """``schema`` with every string's ``maxLength`` at most ``max_chars`` (and ``minLength`` no more than that)."""
    if max_chars is None or not isinstance(schema, (dict, list)):
        return schema
    if isinstance(schema, list):
        return [capped(x, max_chars) for x in schema]
    out = {k: capped(v, max_chars) for k, v in schema.items()}
    if out.get("type") == "string":
        out["maxLength"] = min(out.get("maxLength", max_chars), max_chars)
        if "minLength" in out:
            out["minLength"] = min(out["minLength"], out["maxLength"])
    return out


def parse_json(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """(the object, whether it needed repair), or (None, …) when no object with the schema's required keys can be
    read from ``text``. Types of the required keys are coerced where that is safe (a lone string for a list)."""
    repaired = False
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        import json_repair

        obj, repaired = json_repair.repair_json(text, return_objects=True), True
    if not isinstance(obj, dict):
        return None, repaired
    for key in schema["required"]:
        want = schema["properties"][key].get("type")
        value = obj.get(key)
        if value is None:
            return None, repaired
        if want == "array" and not isinstance(value, list):
            obj[key] = [value]
        elif want == "string" and not isinstance(value, str):
            obj[key] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return obj, repaired


class JSONRole:
    """One role: ``call(chats)`` → one parsed object (or None) per chat, in one engine call per attempt."""

    schema: dict[str, Any] = {}

    def __init__(self, engine, cfg: RoleConfig | None = None):
        self.engine = engine
        self.cfg = cfg or RoleConfig()
        self.stats = RoleStats()
        self._calls = 0

    def call(self, chats: list[list[Message]], schema: dict[str, Any] | None = None) -> list[dict[str, Any] | None]:
        """``schema``: this call's (default: the role's)."""
        schema = schema or self.schema
        out: list[dict[str, Any] | None] = [None] * len(chats)
        todo = list(range(len(chats)))
        for attempt in range(self.cfg.retries + 1):
            if not todo:
                break
            if attempt:
                self.stats.retried += len(todo)
            self._calls += 1
            params = replace(
                self.cfg.sampling,
                temperature=self.cfg.sampling.temperature if attempt == 0 else self.cfg.retry_temperature,
                seed=None,
                seeds=[self.cfg.sampling.seed + 7919 * self._calls + i for i in todo],
                constraint=Constraint.schema(capped(schema, self.cfg.max_chars)) if self.cfg.structured else None,
            )
            comps = self.engine.generate([chats[i] for i in todo], params)
            left = []
            for i, (c,) in zip(todo, comps):
                self.stats.calls += 1
                self.stats.prompt_tokens += c.prompt_tokens
                self.stats.completion_tokens += c.completion_tokens
                obj, repaired = parse_json(c.text, schema)
                if obj is None:
                    left.append(i)
                else:
                    out[i] = obj
                    self.stats.repaired += repaired
            todo = left
        self.stats.failed += len(todo)
        return out


@dataclass
class Sample:
    """One question through the roles: what the generator answered, what the feedback said."""

    task: Any  # agentkit.data.tasks.Task
    context: str = ""  # the playbook text the generator saw
    reasoning: str = ""
    answer: str = ""
    bullet_ids: list[str] = field(default_factory=list)
    correct: bool | None = None  # None: the feedback gives no verdict (label-free without a checker)
    feedback: str = ""
    reflection: dict[str, Any] | None = None

    def read(self, obj: dict[str, Any] | None, known: set[str] | None = None) -> None:
        """Take the generator's answer (None: it failed); ``known``: the playbook's ids, the only ones kept of
        those it listed and cited in its reasoning."""
        obj = obj or {}
        self.reasoning = obj.get("reasoning", "")
        self.answer = str(obj.get("final_answer", "")).strip()
        if known is not None:
            ids = [str(i) for i in obj.get("bullet_ids", [])] + cited_ids(self.reasoning, known)
            self.bullet_ids = [i for i in dict.fromkeys(ids) if i in known]

    def tags(self) -> list[Any]:
        """TAG deltas: ``used`` for each bullet the generator used, and the reflector's tags of those bullets."""
        from agentkit.ace.deltas import Delta

        out = [Delta("TAG", id=i, tag="used") for i in self.bullet_ids]
        for t in (self.reflection or {}).get("bullet_tags", []):
            if (
                isinstance(t, dict)
                and t.get("id") in self.bullet_ids
                and t.get("tag") in ("helpful", "harmful", "neutral")
            ):
                out.append(Delta("TAG", id=t["id"], tag=t["tag"]))
        return out


_JSON_ONLY = "Reply with one JSON object only."


class Generator(JSONRole):
    schema = GENERATOR_SCHEMA
    system = (
        "You answer questions. A playbook of strategies learned from earlier questions comes with each question: "
        "use the bullets that apply and name their ids. " + _JSON_ONLY
    )

    def chat(self, question: str, playbook: str, reflection: str = "") -> list[Message]:
        parts = [f"Playbook:\n{playbook}" if playbook.strip() else "Playbook: (empty)"]
        if reflection:
            parts.append(f"Notes on your previous attempt:\n{reflection}")
        parts.append(
            f"Question: {question}\n\nJSON keys: reasoning (short), bullet_ids (ids of the playbook bullets you "
            'used, e.g. ["calc-00001"]), final_answer (the answer only).'
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": "\n\n".join(parts)}]

    def answer(
        self,
        samples: list[Sample],
        contexts: list[str],
        notes: list[str] | None = None,
        known: set[str] | None = None,
        draws: list[int] | None = None,
    ) -> None:
        """Answer every sample with its context (and notes on a previous attempt), in one batched call; fills
        ``context``, ``reasoning``, ``answer`` and (``known`` given) ``bullet_ids``. The interface
        ``ToolGenerator`` shares. ``draws`` is accepted for it; here every chat of a call already draws with its
        own seed."""
        notes = notes or [""] * len(samples)
        objs = self.call([self.chat(s.task.question, c, n) for s, c, n in zip(samples, contexts, notes)])
        for s, c, obj in zip(samples, contexts, objs):
            s.context = c
            s.read(obj, known)


class Reflector(JSONRole):
    schema = REFLECTOR_SCHEMA
    system = (
        "You review an answer to a question: find what went wrong and why, what the right approach is, and the "
        "key insight to remember. Tag each playbook bullet the answer used as helpful, harmful or neutral. "
        + _JSON_ONLY
    )

    def chat(self, s: Sample, bullets: str, with_reference: bool) -> list[Message]:
        verdict = {True: "the answer is correct.", False: "the answer is wrong.", None: ""}[s.correct]
        lines = [
            f"Question: {s.task.question}",
            f"Reasoning: {s.reasoning}" if s.reasoning else "",
            f"Answer given: {s.answer or '(none)'}",
            f"Reference answer: {s.task.answer}" if with_reference else "",
            f"Feedback: {verdict} {s.feedback}".strip() if verdict or s.feedback else "",
            f"Bullets used:\n{bullets}" if bullets else "Bullets used: none",
        ]
        body = "\n".join(x for x in lines if x)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": body}]


class Curator(JSONRole):
    schema = CURATOR_SCHEMA
    system = (
        "You maintain a playbook of short, reusable strategies. From a reflection on one answer, propose only what "
        "the playbook lacks: ADD a new bullet (section, content), UPDATE a bullet (id, content), MERGE bullets "
        "that say the same (ids, content) or REMOVE a wrong one (id). Do not repeat what the playbook already "
        "says; an empty list is fine. " + _JSON_ONLY
    )

    def chat(self, s: Sample, playbook: str, stats: dict[str, Any], budget: int) -> list[Message]:
        r = s.reflection or {}
        reflection = "\n".join(
            f"{k}: {r.get(k, '')}" for k in ("error_identification", "correct_approach", "key_insight")
        )
        body = (
            f"Token budget of the playbook: {budget}. Bullets: {stats['bullets']} "
            f"({stats['problematic']} problematic, {stats['unused']} unused).\n\n"
            f"Playbook:\n{playbook}\n\nQuestion: {s.task.question}\nAnswer given: {s.answer or '(none)'} "
            f"({ {True: 'correct', False: 'wrong', None: 'not judged'}[s.correct] })\n\nReflection:\n{reflection}\n\n"
            'JSON keys: reasoning, operations (a list of {"type", "section", "content", "id", "ids"}).'
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": body}]

    def schema_for(self, playbook: Any, max_enum: int = 512) -> dict[str, Any]:
        """The schema for one playbook: ADD into its sections, and only its own ids for the operations that name
        bullets (up to ``max_enum`` of them; beyond, any well-formed id); an empty playbook admits only ADD."""
        add, *named = CURATOR_SCHEMA["properties"]["operations"]["items"]["anyOf"]
        ids = sorted(playbook.bullets)
        kinds = [{**add, "properties": {**add["properties"], "section": {"enum": list(playbook.sections)}}}]
        if ids:
            known = {"enum": ids} if len(ids) <= max_enum else BULLET_ID
            kinds += [_with_ids(k, known) for k in named]
        ops = {**CURATOR_SCHEMA["properties"]["operations"], "items": {"anyOf": kinds}}
        return {**CURATOR_SCHEMA, "properties": {**CURATOR_SCHEMA["properties"], "operations": ops}}

    @staticmethod
    def deltas(obj: dict[str, Any] | None) -> tuple[list[Any], int]:
        """The curator's operations as deltas, and how many of them were malformed (skipped, counted)."""
        from agentkit.ace.deltas import Delta

        out, invalid = [], 0
        for op in (obj or {}).get("operations", []) or []:
            try:
                out.append(Delta.parse(op))
            except ValueError:
                invalid += 1
        return out, invalid


def _with_ids(op: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    props = dict(op["properties"])
    if "id" in props:
        props["id"] = known
    if "ids" in props:
        props["ids"] = {**props["ids"], "items": known}
    return {**op, "properties": props}


_CITED = re.compile(r"\[?([a-z][a-z0-9]{0,7}-\d{5})\]?")


def cited_ids(text: str, known: set[str]) -> list[str]:
    """Bullet ids a text mentions (``[calc-00012]`` or bare), in order, only ids the playbook has.

    >>> cited_ids("Using [calc-00012] and err-00003, not x-1.", {"calc-00012", "err-00003"})
    ['calc-00012', 'err-00003']
    """
    return list(dict.fromkeys(i for i in _CITED.findall(text) if i in known))
