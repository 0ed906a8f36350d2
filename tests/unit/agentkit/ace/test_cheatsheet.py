"""The Dynamic Cheatsheet baseline: one call rewrites the whole cheatsheet from the old one and the batch's
outcomes (the reference only with labels), in at most the playbook's budget; its generator reads the cheatsheet."""

import json

from agentkit.ace.cheatsheet import Cheatsheet
from agentkit.ace.roles import Generator, RoleConfig
from agentkit.data.tasks import Task
from agentkit.testing.scripted import ScriptedEngine

LONG = "Multiply first. " * 40  # 640 bytes: more than a 100-token rewrite on a byte-level tokenizer


def engine():
    return ScriptedEngine(
        {
            "Current cheatsheet": [LONG],
            "What is 6 x 7?": [json.dumps({"reasoning": "r", "bullet_ids": [], "final_answer": "41"})],
        }
    )


def test_a_step_rewrites_the_whole_cheatsheet_within_its_budget():
    e = engine()
    dc = Cheatsheet(Generator(e, RoleConfig()), e, RoleConfig(), labels=True, text="old sheet", max_tokens=100)
    m = dc.step([Task("t", "What is 6 x 7?", "42", "mul")], 0)
    assert m["accuracy_first"] == 0.0 and len(e.tokenizer(dc.text).input_ids) <= 100 and dc.text.startswith("Multiply")
    assert dc.usage["rewriter"]["calls"] == 1 and dc.usage["generator"]["calls"] == 1
    (s,) = dc.answer([Task("t", "What is 6 x 7?", "42", "mul")])
    assert s.context == dc.text and s.answer == "41" and s.correct is False


def test_label_free_rewrites_never_see_the_reference():
    seen = []
    e = engine()
    real = e.generate

    def spy(prompts, params=None):
        seen.extend(json.dumps(p) for p in prompts)
        return real(prompts, params)

    e.generate = spy
    task = Task("t", "What is 6 x 7?", "42 exactly", "mul")
    Cheatsheet(Generator(e, RoleConfig()), e, RoleConfig(), labels=False).step([task], 0)
    Cheatsheet(Generator(e, RoleConfig()), e, RoleConfig(), labels=True).step([task], 0)
    rewrites = [p for p in seen if "Current cheatsheet" in p]
    assert len(rewrites) == 2 and "42 exactly" not in rewrites[0] and "42 exactly" in rewrites[1]
