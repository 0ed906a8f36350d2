"""One adaptation step end to end with scripted roles: a wrong answer is reflected on, answered again with the
notes, curated into a new bullet; the next step cites it and tags it; label-free reflection never sees the
reference; the step is one log entry, so a resumed run knows where it stopped."""

import json

from transformers import AutoTokenizer

from agentkit.ace.adapt import AdaptConfig, Adapter
from agentkit.ace.refine import EmbeddingCache, RefineConfig, Refiner
from agentkit.ace.roles import Curator, Generator, Reflector, RoleConfig
from agentkit.ace.store import PlaybookStore
from agentkit.data.tasks import Task
from agentkit.models import resolve
from agentkit.testing.scripted import ScriptedEngine


def gen(answer, ids=()):
    return json.dumps({"reasoning": "I multiply.", "bullet_ids": list(ids), "final_answer": answer})


def refl(insight, tags=()):
    return json.dumps(
        {
            "error_identification": "wrong product" if insight else "",
            "root_cause_analysis": "",
            "correct_approach": "multiply 6 by 7",
            "key_insight": insight,
            "bullet_tags": [{"id": i, "tag": t} for i, t in tags],
        }
    )


SCRIPT = {
    # curator (its prompt holds the verdict after the answer)
    "Answer given: 42 (correct)": [
        json.dumps(
            {
                "reasoning": "new",
                "operations": [
                    {
                        "type": "ADD",
                        "section": "formulas_and_calculations",
                        "content": "6 x 7 = 42; check products twice.",
                    },
                    {"type": "RENAME", "id": "x"},
                ],
            }
        )
    ],
    "Answer given: 56 (correct)": [json.dumps({"reasoning": "nothing new", "operations": []})],
    # reflector
    "Answer given: 41\n": [refl("check products twice")],
    "Answer given: 42\n": [refl("")],
    "Answer given: 56\n": [refl("", [("calc-00001", "helpful")])],
    # generator
    "Notes on your previous attempt": [gen("42")],
    "What is 6 x 7?": [gen("41")],
    "What is 7 x 8?": [gen("56", ["calc-00001", "nope-00009"])],
}


def adapter(tmp_path, labels=True):
    engine = ScriptedEngine(SCRIPT)
    cfg = RoleConfig(structured=False, retries=0)
    tok = AutoTokenizer.from_pretrained(str(resolve("smollm2-135m")))
    refiner = Refiner(RefineConfig(budget_tokens=2000), lambda t: len(tok(t).input_ids), EmbeddingCache())
    store = PlaybookStore.create(tmp_path / "pb.json")
    roles = Generator(engine, cfg), Reflector(engine, cfg), Curator(engine, cfg)
    return Adapter(*roles, store, refiner, AdaptConfig(labels=labels, max_rounds=2)), engine


def test_a_wrong_answer_becomes_a_bullet_that_the_next_step_uses(tmp_path):
    a, _ = adapter(tmp_path)
    m = a.step([Task("q1", "What is 6 x 7?", "42", "mul")], step=0)
    assert (m["accuracy_first"], m["accuracy_final"]) == (0.0, 1.0)
    assert m["ops_proposed"] == 2 and m["ops_invalid"] == 1 and m["bullets_added"] == 1
    pb = a.store.playbook
    assert [(b.id, b.content) for b in pb.ordered()] == [("calc-00001", "6 x 7 = 42; check products twice.")]
    assert (
        a.usage["generator"]["calls"] == 2 and a.usage["reflector"]["calls"] == 2 and a.usage["curator"]["calls"] == 1
    )
    assert a.last_step() == 0

    m = a.step([Task("q2", "What is 7 x 8?", "56", "mul")], step=1)
    b = a.store.playbook.bullets["calc-00001"]
    assert (b.used, b.helpful, m["accuracy_first"]) == (1, 1, 1.0)  # the unknown cited id is dropped
    assert a.last_step() == 1
    assert [r["source"] for r in a.store.history()] == ["init", "curator", "curator"]
    a.store.verify()


def test_label_free_reflection_sees_only_the_feedback(tmp_path):
    a, engine = adapter(tmp_path, labels=False)
    seen = []
    real = engine.generate
    engine.generate = lambda prompts, params=None: (seen.extend(prompts), real(prompts, params))[1]
    a.step([Task("q1", "What is 6 x 7?", "42", "mul")], step=0)
    reflector_prompts = [
        p[-1]["content"] for p in seen if "Answer given" in p[-1]["content"] and "Token budget" not in p[-1]["content"]
    ]
    assert reflector_prompts and all("Reference" not in p and "A checker" in p for p in reflector_prompts)


class Copies:
    """A generator whose fresh answers are given per question (by the samples' order)."""

    def __init__(self, answers):
        self.answers, self.seen = answers, []

    def answer(self, samples, contexts, notes=None, known=None, draws=None):
        self.seen.append((list(contexts), list(draws)))
        per_q = {}
        for s in samples:
            i = per_q.get(s.task.id, 0)
            s.answer = self.answers[s.task.id][i]
            per_q[s.task.id] = i + 1


def test_self_consistency_judges_by_agreement_and_never_reads_the_reference():
    from agentkit.ace.adapt import SelfConsistency, judge
    from agentkit.ace.roles import Sample

    tasks = [Task(f"q{i}", "What is 6 x 7?", "99", "mul") for i in range(3)]  # a wrong reference: never read
    fresh = Copies({"q0": ["42.0", "42", "41", "42"], "q1": ["42", "42", "42", "40"], "q2": ["1", "2", "3", "4"]})
    samples = [Sample(t) for t in tasks]
    for s, a, c in zip(samples, ["42", "41", ""], ["ctx0", "ctx1", "ctx2"]):
        s.answer, s.context = a, c
    sc = SelfConsistency(fresh, n=4)
    judge(sc, samples)
    assert [s.correct for s in samples] == [True, False, False]  # 4 of 5 agree; 1 of 5; no answer
    assert samples[0].feedback.startswith("4 of 5") and samples[1].feedback.startswith("1 of 5")
    contexts, draws = fresh.seen[0]
    assert contexts[:4] == ["ctx0"] * 4 and len(set(draws)) == 12  # the same context, every copy its own draw
    judge(sc, samples[:1])
    assert set(fresh.seen[1][1]).isdisjoint(draws)  # asked again (a re-answer round), it draws afresh


def test_label_free_adaptation_judges_by_consistency_and_evaluation_by_the_checker(tmp_path):
    from agentkit.ace.adapt import SelfConsistency

    a, _ = adapter(tmp_path, labels=False)
    a.feedback = SelfConsistency(Copies({"q1": ["41"] * 4}), n=4)
    m = a.step([Task("q1", "What is 6 x 7?", "42", "mul")], step=0)
    assert m["accuracy_first"] == 1.0  # 41 agreed with every fresh answer: judged right, though it is wrong
    (s,) = a.answer([Task("q1", "What is 6 x 7?", "42", "mul")])
    assert s.correct is False and s.feedback.startswith("A checker")  # evaluation scores against the reference
