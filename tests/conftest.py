import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # an accidental hub call fails fast instead of hanging
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    """The folder says what a test needs: tests/integration (real servers, subprocesses, recipe runs) is marked
    ``integration``, tests/e2e (the real embedded models) ``slow``; tests/unit stays unmarked (``make test-fast``)."""
    for item in items:
        part = Path(item.fspath).relative_to(HERE).parts[0]
        if part == "integration":
            item.add_marker(pytest.mark.integration)
        elif part == "e2e":
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_engine():
    from agentkit.engines.hf import HFEngine

    return HFEngine("tiny-random", max_batch_size=8)


@pytest.fixture(scope="session")
def smol_engine():
    from agentkit.engines.hf import HFEngine

    return HFEngine("smollm2-135m")


# A small saved-generations file (two models, six questions, two tasks): the uncertainty schema and score tests.


def _row(i, ref, other, gold="7", task="t"):
    return {
        "id": f"q{i}",
        "question": f"q{i}?",
        "reference": gold,
        "task": task,
        "metric": "numeric",
        "samples": {"m0": ref, "m1": other},
    }


@pytest.fixture
def gens(tmp_path):
    rows = [
        _row(0, ["7", "7", "7"], ["7", "7"]),
        _row(1, ["3", "3", "3"], ["9", "8"]),  # confident failure
        _row(2, ["5", "7", "2"], ["7", "1"]),
        _row(3, ["7", "7", "6"], ["7", "7"], task="u"),
        _row(4, ["4", "4", "1"], ["7", "7"], task="u"),
        _row(5, ["7", "7", "7"], ["7", "6"], task="u"),
    ]
    p = tmp_path / "gens.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p
