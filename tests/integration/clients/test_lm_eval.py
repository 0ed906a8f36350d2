"""lm-evaluation-harness's ``local-completions`` against ``agentkit serve`` on the embedded model, unchanged: it
sends token-id lists with ``echo``, ``max_tokens=1`` and ``logprobs=1`` and reads every echoed position's
``top_logprobs``; the log-likelihoods and greedy flags it gets equal those of its own ``hf`` backend on the same
weights, on a local multiple-choice task file. Its tokenizer is the model's own files, or the server's
(``tokenizer_backend`` left to ``auto``: lm-eval finds ``/tokenizer_info`` and ``/tokenize`` and uses them)."""

import json

import pytest

from agentkit.models.catalog import resolve
from agentkit.server import create_app
from agentkit.testing.servers import serve_in_thread

QUESTIONS = [
    ("What is the capital of France?", ["Paris", "Berlin", "Madrid", "Rome"], 0),
    ("How many legs does a spider have?", ["six", "eight", "ten", "four"], 1),
    ("Which planet is closest to the sun?", ["Venus", "Earth", "Mercury", "Mars"], 2),
    ("What colour is the sky on a clear day?", ["green", "red", "yellow", "blue"], 3),
    ("What do bees make?", ["honey", "milk", "silk", "wax paper"], 0),
    ("What is two plus three?", ["four", "five", "six", "seven"], 1),
]

TASK = """task: agentkit_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
"""


def _evaluate(lm_eval, task_manager, model: str, model_args: str) -> tuple[list, float]:
    out = lm_eval.simple_evaluate(
        model=model, model_args=model_args, tasks=["agentkit_mc"], task_manager=task_manager, log_samples=True
    )
    samples = sorted(out["samples"]["agentkit_mc"], key=lambda s: s["doc_id"])
    return [[tuple(r[0]) for r in s["resps"]] for s in samples], out["results"]["agentkit_mc"]["acc,none"]


def test_local_completions_equals_lm_evals_own_hf_backend(tmp_path, smol_engine, monkeypatch):
    lm_eval = pytest.importorskip("lm_eval")  # a dev dependency; the import is slow, so only here
    from lm_eval.tasks import TaskManager

    data = tmp_path / "mc.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n" for q, c, a in QUESTIONS))
    (tmp_path / "agentkit_mc.yaml").write_text(TASK.format(data=data))
    tm = TaskManager(include_path=str(tmp_path))
    path = resolve("smollm2-135m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-lm-eval")  # what local-completions sends as its bearer token
    args = "model=smollm2-135m,base_url={url}/v1/completions,num_concurrent=1,max_retries=1,"
    with serve_in_thread(create_app(smol_engine, "smollm2-135m", api_key="sk-lm-eval")) as url:
        runs = [
            _evaluate(lm_eval, tm, "local-completions", args.format(url=url) + tokenizer)
            for tokenizer in (f"tokenizer_backend=huggingface,tokenizer={path}", "auth_token=sk-lm-eval")
        ]
    own, own_acc = _evaluate(lm_eval, tm, "hf", f"pretrained={path},dtype=float32,device=cpu")
    for served, served_acc in runs:
        assert len(served) == len(QUESTIONS) and all(len(r) == 4 for r in served)
        for got, want in zip(served, own):
            assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in want], rel=1e-4, abs=1e-4)
            assert [g for _, g in got] == [g for _, g in want]  # greedy: read from the echoed top_logprobs
        assert served_acc == own_acc
