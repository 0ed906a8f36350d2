"""Structured outputs: a ``Constraint`` on what a completion may be (JSON schema, any JSON object, regex, a choice
of strings, a grammar), enforced token by token with llguidance.

Every engine takes the same ``Constraint`` (``SamplingParams.constraint`` or, per prompt, ``constraints``):
``HFEngine`` masks each constrained row's next-token distribution with an llguidance matcher (``RowGrammars``;
the other rows of the batch are untouched); ``VLLMEngine`` passes it to vLLM's own structured outputs
(``StructuredOutputsParams``, with vLLM's llguidance backend, ``guidance``); ``OpenAIEngine`` sends it as vLLM's
``structured_outputs`` request field, which ``agentkit serve`` accepts as well.

Why llguidance: ``agentkit bench structured`` put xgrammar, llguidance and outlines-core behind the same HF
logits processor on this CPU. At batch 32 their masks took 20.5 / 7.3 / 31.4 ms per decode step (xgrammar is as
fast on free strings but ~13× slower on length-bounded ones, outlines-core needs ~20 s to build a schema's
index).

JSON is compact (no free whitespace, ``", "`` and ``": "`` separators: ``{"a": 1, "b": [2, 3]}``): a small
model allowed free whitespace writes long pretty-printed objects and runs out of budget more often. Schemas are
strict, as OpenAI's strict mode and vLLM's defaults make them: an object schema that does not say otherwise
admits no properties beyond those it names. Logprobs stay those of the unconstrained distribution (the Engine
protocol's rule); the sample is drawn from the masked one.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentkit.config import option
from agentkit.jsontext import json_depth

if TYPE_CHECKING:
    import torch

JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
# Deepest JSON schema text compiled (objects and arrays); deeper ones are refused before any recursive walk.
MAX_SCHEMA_DEPTH = 48


@dataclass(frozen=True)
class Constraint:
    """Exactly one of: ``json`` (a JSON schema, as JSON text), ``json_object`` (any JSON object), ``regex``,
    ``choice`` (one of these strings, verbatim) or ``grammar`` (llama.cpp's GBNF, or Lark). The field names are
    vLLM's ``StructuredOutputsParams``.

    >>> Constraint.schema({"type": "integer"}).body()
    {'json': {'type': 'integer'}}
    """

    json: str | None = option(None, "a JSON schema, as JSON text: the completion is a JSON value that satisfies it")
    json_object: bool = option(False, "the completion is any JSON object")
    regex: str | None = option(None, "the completion matches this regular expression")
    choice: tuple[str, ...] | None = option(None, "the completion is one of these strings, verbatim")
    grammar: str | None = option(None, "the completion follows this grammar (llama.cpp's GBNF, or Lark)")

    def __post_init__(self) -> None:
        kinds = [k for k in ("json", "regex", "choice", "grammar") if getattr(self, k) is not None]
        if self.json_object:
            kinds.append("json_object")
        if len(kinds) != 1:
            raise ValueError(f"a constraint has exactly one of json, json_object, regex, choice, grammar; got {kinds}")
        if self.choice is not None and not self.choice:
            raise ValueError("choice needs at least one string")

    @classmethod
    def schema(cls, schema: dict[str, Any] | str) -> Constraint:
        return cls(json=schema if isinstance(schema, str) else json.dumps(schema))  # key order is output order

    @classmethod
    def from_body(cls, body: Any, param: str = "structured_outputs") -> Constraint:
        """vLLM's HTTP ``structured_outputs`` object (``{"json": schema}``, ``{"regex": "…"}``, ``{"choice": […]}``,
        ``{"grammar": "…"}``, ``{"json_object": true}``); other keys vLLM knows (``disable_any_whitespace``…)
        are accepted and ignored. Raises ``ValueError`` naming the field."""
        if not isinstance(body, dict):
            raise ValueError(f"{param} must be an object")
        picked = {k: body[k] for k in ("json", "regex", "choice", "grammar") if body.get(k) is not None}
        if body.get("json_object"):
            picked["json_object"] = True
        if len(picked) != 1:
            raise ValueError(f"{param} needs exactly one of json, json_object, regex, choice, grammar")
        ((key, value),) = picked.items()
        if key == "json":
            if not isinstance(value, (dict, str, bool)):
                raise ValueError(f"{param}.json must be a JSON schema")
            return cls.schema(value if not isinstance(value, bool) else {})
        if key == "choice":
            if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
                raise ValueError(f"{param}.choice must be a non-empty list of strings")
            return cls(choice=tuple(value))
        if key == "json_object":
            return cls(json_object=True)
        if not isinstance(value, str):
            raise ValueError(f"{param}.{key} must be a string")
        return cls(**{key: value})

    def body(self) -> dict[str, Any]:
        """The HTTP ``structured_outputs`` object (vLLM and ``agentkit serve``)."""
        if self.json is not None:
            return {"json": json.loads(self.json)}
        if self.json_object:
            return {"json_object": True}
        if self.choice is not None:
            return {"choice": list(self.choice)}
        return {"regex": self.regex} if self.regex is not None else {"grammar": self.grammar}

    def response_format(self) -> dict[str, Any] | None:
        """OpenAI's chat ``response_format`` for a JSON constraint (None for the other kinds, which only vLLM's
        ``structured_outputs`` can carry)."""
        if self.json_object:
            return {"type": "json_object"}
        if self.json is not None:
            return {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": json.loads(self.json), "strict": True},
            }
        return None

    def vllm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of vLLM's ``StructuredOutputsParams``, compact JSON as here."""
        return {**self.body(), "disable_any_whitespace": True}

    def to_grammar(self) -> str:
        """The llguidance grammar (no tokenizer needed). Raises ``ValueError`` with llguidance's reason when the
        schema, regex or grammar is invalid, so a server can answer 400 before anything is generated. Cached:
        the server's check and the engine's matchers build it once."""
        return _grammar_of(self)

    def _build_grammar(self) -> str:
        from llguidance import LLMatcher, grammar_from

        if self.json is not None and (depth := json_depth(self.json)) > MAX_SCHEMA_DEPTH:
            raise ValueError(f"the JSON schema nests {depth} levels deep; at most {MAX_SCHEMA_DEPTH} are accepted")
        if self.json is not None:
            grammar = LLMatcher.grammar_from_json_schema(strict_schema(json.loads(self.json)), defaults=JSON_LAYOUT)
        elif self.json_object:
            grammar = LLMatcher.grammar_from_json_schema({"type": "object"}, defaults=JSON_LAYOUT)
        elif self.regex is not None:
            grammar = LLMatcher.grammar_from_regex(self.regex)
        elif self.choice is not None:
            grammar = grammar_from("choice", json.dumps(list(self.choice)))
        else:
            grammar = grammar_from("grammar", self.grammar)  # GBNF (llama.cpp's) or Lark; raises ValueError
        error = LLMatcher.validate_grammar(grammar)
        if error:  # one line: the first, and the parser's own "error: ..." line if it drew the source below it
            lines = [x.strip() for x in error.strip().splitlines()]
            raise ValueError(" ".join([lines[0], *[x for x in lines[1:] if x.startswith("error:")][:1]]))
        return grammar

    def check(self) -> None:
        """Raise ``ValueError`` if the constraint cannot be compiled."""
        self.to_grammar()


@functools.lru_cache(maxsize=256)
def _grammar_of(c: Constraint) -> str:
    return c._build_grammar()


def strict_schema(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object schema that does not set it.

    >>> strict_schema({"type": "object", "properties": {"a": {"type": "object"}}})
    {'type': 'object', 'properties': {'a': {'type': 'object', 'additionalProperties': False}}, 'additionalProperties': False}
    """
    if isinstance(schema, list):
        return [strict_schema(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) if k != "const" and k != "enum" else v for k, v in schema.items()}
    if (out.get("type") == "object" or "properties" in out) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


class GrammarCompiler:
    """Turns constraints into matchers for one tokenizer (llguidance)."""

    def __init__(self, tokenizer, vocab_size: int, stop_ids: set[int]):
        import llguidance
        import llguidance.hf

        self._llg = llguidance
        # llguidance stops a complete grammar with its EOS; the model's other end tokens count as EOS too
        self._tokenizer = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=sorted(stop_ids))
        self.vocab_size = vocab_size

    def rows(self, constraints: list[Constraint | None]) -> RowGrammars:
        """Matchers for a batch's rows (None where a row is free)."""
        return RowGrammars(
            [self._llg.LLMatcher(self._tokenizer, c.to_grammar()) if c is not None else None for c in constraints],
            self.vocab_size,
        )


class RowGrammars:
    """One llguidance matcher per constrained row of a decode batch (rows are sequence indices, stable while the
    batch shrinks). A matcher advances only on tokens the row keeps."""

    def __init__(self, matchers: list, vocab_size: int):
        self.matchers, self.vocab_size = matchers, vocab_size
        self.errors: dict[int, str] = {}  # sequence -> why its grammar could not go on

    def error(self, seq: int) -> str | None:
        """Why ``seq``'s grammar failed (llguidance's limits: an ambiguous grammar can outgrow the parser's
        item budget), or None. A failed row ends with ``finish_reason="error"``; the batch's other rows go on."""
        return self.errors.get(seq)

    def mask(self, seqs: list[int], logp: torch.Tensor) -> torch.Tensor:
        """``logp [R, V]`` for the sequences ``seqs`` (one per row) → a copy with the tokens each constrained
        row's grammar forbids at -inf; ``logp`` itself when no row here is constrained.

        The matcher fills a bitmask ``[R', ceil(V/32)]`` (int32, bit j of word w = token 32·w + j allowed),
        applied by ``apply_bitmask``."""
        import llguidance.torch
        import torch

        rows = [r for r, s in enumerate(seqs) if self.matchers[s] is not None and s not in self.errors]
        if not rows:
            return logp
        bitmask = torch.empty(len(rows), (self.vocab_size + 31) // 32, dtype=torch.int32)
        for k, r in enumerate(rows):
            m = self.matchers[seqs[r]]
            llguidance.torch.fill_next_token_bitmask(m, bitmask, k)
            if m.is_error():
                self.errors[seqs[r]] = _first_line(m.get_error())
        out = logp.clone()
        idx = torch.tensor(rows, device=logp.device)
        out[idx] = apply_bitmask(logp[idx], bitmask)
        return out

    def advance(self, seq: int, token: int) -> bool | str:
        """Advance ``seq``'s matcher by ``token``: True when its grammar is now complete (the token ended it),
        False while it goes on, or the error (a string) when the matcher could not take the token."""
        m = self.matchers[seq]
        if m is None:
            return False
        if seq in self.errors:
            return self.errors[seq]
        if not m.consume_token(token) or m.is_error():
            self.errors[seq] = _first_line(m.get_error()) or f"the grammar rejected the token {token}"
            return self.errors[seq]
        return m.is_stopped()


def _first_line(text: str) -> str:
    return next((x.strip() for x in (text or "").splitlines() if x.strip()), "")


def apply_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """``logits [R, V]`` with every token the ``bitmask [R, ceil(V/32)]`` (int32; bit j of word w allows token
    32·w + j, the layout llguidance, xgrammar and outlines-core fill) forbids set to -inf.

    >>> import torch
    >>> apply_bitmask(torch.zeros(1, 3), torch.tensor([[0b101]], dtype=torch.int32)).tolist()
    [[0.0, -inf, 0.0]]
    """
    import torch

    bits = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    allowed = ((bitmask[:, :, None] >> bits) & 1).bool().view(bitmask.shape[0], -1)[:, : logits.shape[-1]]
    return logits.masked_fill(~allowed.to(logits.device), float("-inf"))


__all__ = ["Constraint", "GrammarCompiler", "RowGrammars", "apply_bitmask"]
