"""Constraints: parsing vLLM's structured_outputs body, what each kind admits, and clear errors."""

import re

import pytest

from agentkit.engines import SamplingParams
from agentkit.engines.structured import Constraint


@pytest.mark.parametrize(
    "body",
    [
        {"json": {"type": "integer"}},
        {"regex": "a+"},
        {"choice": ["x", "y z"]},
        {"grammar": 'root ::= "a" | "b"'},
        {"json_object": True},
    ],
)
def test_body_round_trip(body):
    c = Constraint.from_body({**body, "disable_any_whitespace": True})  # vLLM's other keys are ignored
    assert c.body() == body and c.vllm_kwargs() == {**body, "disable_any_whitespace": True}
    c.check()


@pytest.mark.parametrize(
    "body,words",
    [
        ({}, "exactly one of"),
        ({"regex": "a", "choice": ["b"]}, "exactly one of"),
        ({"choice": []}, "non-empty list"),
        ({"choice": [1]}, "list of strings"),
        ({"regex": 3}, "must be a string"),
        ({"json": 3}, "JSON schema"),
        ("text", "must be an object"),
    ],
)
def test_bad_bodies_name_the_field(body, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        Constraint.from_body(body)


@pytest.mark.parametrize(
    "c,words",
    [
        (Constraint.schema({"type": "objec"}), "Invalid type: objec"),
        (Constraint(regex="[a-"), "error: unclosed character class"),
        (Constraint(grammar="root ::= foo"), "Rule 'foo' not found"),
    ],
)
def test_invalid_constraints_say_why_in_one_line(c, words):
    with pytest.raises(ValueError, match=re.escape(words)) as e:
        c.check()
    assert "\n" not in str(e.value)


def test_grammars_and_strict_schemas():
    """GBNF and Lark grammars both work; object schemas admit no unnamed properties unless they say so."""
    from agentkit.engines.structured import strict_schema

    Constraint(grammar='root ::= "a" [0-9]+').check()
    Constraint(grammar='start: "a" /[0-9]+/').check()
    assert strict_schema({"type": "object", "additionalProperties": True}) == {
        "type": "object",
        "additionalProperties": True,
    }
    assert strict_schema({"enum": [{"type": "object"}]}) == {"enum": [{"type": "object"}]}  # values, not schemas


def test_constraints_are_per_prompt_fields():
    """Requests that differ only in constraints share one engine call (the server's batcher), each prompt
    keeping its own; split() gives each prompt's params back."""
    a, b = SamplingParams(constraint=Constraint(regex="a")), SamplingParams(seed=2)
    assert a.batch_key() == b.batch_key()
    joined = SamplingParams.concat([(a, 2), (b, 1)])
    assert joined.constraints == [Constraint(regex="a")] * 2 + [None] and joined.seeds == [None, None, 2]
    assert [(p.constraint, p.seed) for p in joined.split(3)] == [(Constraint(regex="a"), None)] * 2 + [(None, 2)]
    with pytest.raises(ValueError, match="constraints has 1 entries for 2 prompts"):
        SamplingParams(constraints=[None]).check_per_prompt(2)


def test_a_grammar_that_outgrows_the_parser_is_that_row_s_error(tiny_engine):
    """llguidance keeps at most 2,000 Earley items per row; this ambiguous grammar outgrows them on a run of
    letters. ``advance`` returns llguidance's reason instead of raising, and the row keeps it (the engine ends that
    row with finish_reason "error"; the batch's other rows go on: ``tests/integration/server/test_hostile.py``)."""
    from agentkit.engines.structured import GrammarCompiler

    runaway = Constraint(
        grammar='start: x "z"\nx: ' + " | ".join(" ".join(["x"] * k) for k in range(2, 10)) + " | /[a-y]/"
    )
    rows = GrammarCompiler(tiny_engine.tokenizer, 259, tiny_engine.eos_ids).rows([runaway])
    a = tiny_engine.tokenize("a")[0]
    outcome = next((r for _ in range(400) if (r := rows.advance(0, a)) is not False), False)
    assert isinstance(outcome, str) and "items" in outcome and rows.error(0) == outcome
    assert rows.advance(0, a) == outcome  # a failed row stays failed
