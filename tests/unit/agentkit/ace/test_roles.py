"""The roles' JSON: parsed, repaired, retried, then skipped and counted; under a schema the real engine's answers
always parse; usage is counted per call."""

from agentkit.ace.playbook import Playbook
from agentkit.ace.roles import (
    CURATOR_SCHEMA,
    GENERATOR_SCHEMA,
    Curator,
    Generator,
    Reflector,
    RoleConfig,
    Sample,
    parse_json,
)
from agentkit.data.tasks import Task
from agentkit.engines.base import SamplingParams
from agentkit.testing.scripted import ScriptedEngine


def test_parse_json_repairs_and_coerces():
    obj, repaired = parse_json('{"reasoning": "r", "bullet_ids": [], "final_answer": "42"}', GENERATOR_SCHEMA)
    assert obj["final_answer"] == "42" and not repaired
    obj, repaired = parse_json(
        'Sure: {"reasoning": "r", "bullet_ids": "x-00001", "final_answer": 42,', GENERATOR_SCHEMA
    )
    assert repaired and obj["bullet_ids"] == ["x-00001"] and obj["final_answer"] == "42"
    assert parse_json('{"reasoning": "r"}', GENERATOR_SCHEMA)[0] is None  # required keys missing
    assert parse_json("no json at all", CURATOR_SCHEMA)[0] is None
    assert parse_json('["a list"]', CURATOR_SCHEMA)[0] is None


def test_curator_operations_become_deltas_and_malformed_ones_are_counted():
    ops = [
        {"type": "ADD", "section": "units", "content": "Round to two decimals."},
        {"type": "UPDATE", "content": "no id"},  # UPDATE without an id
        {"type": "REMOVE", "id": "units-00001"},
        "not an object",
    ]
    deltas, invalid = Curator.deltas({"reasoning": "r", "operations": ops})
    assert [d.op for d in deltas] == ["ADD", "REMOVE"] and invalid == 2
    assert deltas[0].section == "units" and deltas[1].id == "units-00001"
    assert Curator.deltas(None) == ([], 0) and Curator.deltas({"operations": None}) == ([], 0)


def test_bad_json_is_retried_then_skipped_and_counted():
    good = '{"reasoning": "r", "bullet_ids": ["misc-00001"], "final_answer": "7"}'
    engine = ScriptedEngine(
        {
            "Question: fine": [good],
            "Question: flaky": [["I think it is 7."], [good]],  # the seed picks: a retry gets another sample
            "Question: hopeless": ["no idea"],
        }
    )
    gen = Generator(engine, RoleConfig(structured=False, retries=2))
    out = gen.call([gen.chat(q, "## OTHERS") for q in ("fine", "flaky", "hopeless")])
    assert out[0]["final_answer"] == "7" and out[1]["final_answer"] == "7" and out[2] is None
    s = gen.stats
    assert s.failed == 1 and s.retried >= 2 and s.calls == 3 + s.retried
    assert len(engine.calls) == 3 and engine.calls[0] == 3  # one batched engine call per attempt
    assert s.prompt_tokens > 0 and s.completion_tokens > 0


def test_structured_answers_from_a_real_engine_parse(tiny_engine):
    task = Task("t1", "What is 2 + 2?", "4", "add")
    s = Sample(task, answer="5", reasoning="2 + 2 = 5", bullet_ids=["misc-00001"], feedback="")
    bullets = "[misc-00001] helpful=0 harmful=0 :: Add carefully."
    cfg = RoleConfig(
        max_chars=24, retries=0, sampling=SamplingParams(max_tokens=1200, temperature=0.0, seed=0)
    )  # byte-level tokenizer: up to 4 tokens a character
    roles = [
        (Generator(tiny_engine, cfg), [Generator(None).chat(task.question, "## OTHERS\n" + bullets)]),
        (Reflector(tiny_engine, cfg), [Reflector(None).chat(s, bullets, with_reference=True)]),
        (
            Curator(tiny_engine, cfg),
            [Curator(None).chat(s, "## OTHERS\n" + bullets, {"bullets": 1, "problematic": 0, "unused": 1}, 500)],
        ),
    ]
    for role, chats in roles:
        (obj,) = role.call(chats * 1)
        assert obj is not None and set(role.schema["required"]) <= obj.keys(), role
        assert role.stats.failed == 0


def test_under_the_curators_schema_every_operation_is_valid_and_names_only_known_ids(tiny_engine):
    """The random tiny model writes whatever the grammar allows: each sampled operation must still parse, an empty
    playbook admits only ADD, and ids come from the playbook."""
    s = Sample(Task("t1", "What is 2 + 2?", "4", "add"), answer="5", reflection={"key_insight": "add"})
    cur = Curator(
        tiny_engine,
        RoleConfig(max_chars=20, retries=0, sampling=SamplingParams(max_tokens=1500, temperature=1.0, seed=0)),
    )
    chat = cur.chat(s, "## OTHERS", {"bullets": 0, "problematic": 0, "unused": 0}, 500)
    full = Playbook.from_text("## OTHERS\n[misc-00001] helpful=0 harmful=0 :: a\n[calc-00002] helpful=0 harmful=0 :: b")
    for pb, allowed in ((Playbook(), {"ADD"}), (full, {"ADD", "UPDATE", "MERGE", "REMOVE"})):
        ids = set(pb.bullets)
        schema = cur.schema_for(pb)
        schema["properties"]["operations"] = {**schema["properties"]["operations"], "minItems": 2}  # make it write some
        objs = cur.call([chat] * 6, schema)
        ops = [op for obj in objs if obj for op in obj["operations"]]
        assert ops  # seeded: the same draws every run
        deltas, invalid = Curator.deltas({"operations": ops})
        assert invalid == 0 and {d.op for d in deltas} <= allowed
        named = {i for d in deltas for i in (d.id, *d.ids) if i and d.op != "ADD"}
        assert named <= ids and {d.section for d in deltas if d.op == "ADD"} <= set(pb.sections)
    assert cur.stats.failed == 0


def test_the_label_free_reflector_never_sees_the_reference():
    task = Task("t1", "Convert 3 zorbs to blips.", "21", "convert")
    s = Sample(task, answer="9", feedback="the checker rejected 9")
    with_ref = Reflector(None).chat(s, "", with_reference=True)[1]["content"]
    without = Reflector(None).chat(s, "", with_reference=False)[1]["content"]
    assert "21" in with_ref and "21" not in without and "the checker rejected 9" in without
