"""agentkit.uncertainty.ensemble: SFT rows in generate's prompt format (loss on the answer only, an end of turn
after it), dev accuracy as score judges it, and ensemble files as --models specs."""

import json

import pytest

from agentkit.data.tasks import Task
from agentkit.errors import AgentkitError
from agentkit.models.catalog import PLAIN_CHAT_TEMPLATE, load_tokenizer
from agentkit.uncertainty.ensemble import dev_accuracy, read_ensemble, sft_rows, write_ensemble
from agentkit.uncertainty.generate import ModelSpec, expand_models
from agentkit.uncertainty.prompts import SYSTEM, question_prompt

TASKS = [Task("q1", "What is 2 + 3?", "5", "add", "numeric"), Task("q2", "Who founded Velra?", "Onna", "f", "em_f1")]


@pytest.mark.parametrize("template", ["chatml", "plain"])
def test_sft_rows_train_the_answer_after_generates_prompt(template):
    tok = load_tokenizer("tiny-random")
    if template == "plain":
        tok.chat_template = PLAIN_CHAT_TEMPLATE  # Gemma 3 base's: no end-of-turn token after the answer
    for task, row in zip(TASKS, sft_rows(tok, TASKS)):
        prompt = tok.apply_chat_template(
            question_prompt(task, SYSTEM, True), add_generation_prompt=True, tokenize=False
        )
        n = len(tok(prompt, add_special_tokens=False).input_ids)
        assert row["input_ids"][:n] == tok(prompt, add_special_tokens=False).input_ids
        assert row["labels"][:n] == [-100] * n and row["labels"][n:] == row["input_ids"][n:]
        trained = tok.decode(row["input_ids"][n:])
        assert trained.strip().startswith(task.answer) and tok.eos_token_id in row["input_ids"][n:]


class Scripted:
    """An engine that answers from a table (the unit test's stand-in; recipes use real engines)."""

    def __init__(self, answers):
        self.answers = answers

    def generate(self, prompts, params):
        from agentkit.engines.base import Completion

        return [[Completion(self.answers[p[-1]["content"]], [], [], "stop", 0)] for p in prompts]


def test_dev_accuracy_judges_as_score_does():
    engine = Scripted({"What is 2 + 3?": " 5.0 ", "Who founded Velra?": "It was Onna Traskel."})
    assert dev_accuracy(engine, TASKS) == {"accuracy": 1.0, "add": 1.0, "f": 1.0}
    engine = Scripted({"What is 2 + 3?": "6", "Who founded Velra?": "Onna"})
    assert dev_accuracy(engine, TASKS) == {"accuracy": 0.5, "add": 0.0, "f": 1.0}


def test_ensemble_files_expand_to_named_specs(tmp_path):
    path = tmp_path / "ensemble.json"
    write_ensemble(path, {"name": "smollm2-135m", "path": "smollm2-135m"}, [{"name": "g", "path": "org/g", "step": 3}])
    assert read_ensemble(path) == ["smollm2-135m=smollm2-135m", "g=org/g"]
    specs = [ModelSpec.parse(m) for m in expand_models([f"@{path}", "openai:x@http://h/v1"])]
    assert [(s.key, s.kind, s.name) for s in specs] == [
        ("smollm2-135m", "hf", "smollm2-135m"),
        ("g", "hf", "org/g"),
        ("x", "openai", "x"),
    ]
    assert ModelSpec.parse("mine=vllm:org/m").key == "mine" and ModelSpec.parse("mine=vllm:org/m").kind == "vllm"
    # each spec is a typed engine config, checked when parsed (before any model loads)
    assert ModelSpec.parse("openai:x@http://h/v1").engine.base_url == "http://h/v1"
    with pytest.raises(AgentkitError, match="model spec '/no/such': model: unknown model"):
        ModelSpec.parse("/no/such")
    with pytest.raises(AgentkitError, match="is not an http"):
        ModelSpec.parse("openai:x@ftp://h")
    (tmp_path / "bad.json").write_text(json.dumps({"members": []}))
    with pytest.raises(AgentkitError, match="not an ensemble file"):
        expand_models([f"@{tmp_path / 'bad.json'}"])
