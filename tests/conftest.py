import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # an accidental hub call fails fast instead of hanging
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

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
