"""agentkit.eval.metrics: numeric and EM/F1 scorers."""

import pytest

import agentkit.eval.metrics as metrics


def test_scorers():
    assert metrics.score_task("numeric", "so it is 1,234.", "1234") == {"correct": 1.0}
    assert metrics.score_task("numeric", "no number", "5") == {"correct": 0.0}
    s = metrics.score_task("em_f1", "<answer>Drenholt city</answer>", "Drenholt")
    assert s["correct"] == 0.0 and 0 < s["f1"] < 1
    assert metrics.extract_answer(r"\boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    with pytest.raises(ValueError):
        metrics.score_task("bleu", "a", "b")
