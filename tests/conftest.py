import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # an accidental hub call fails fast instead of hanging
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_engine():
    from agentkit.engines.hf import HFEngine

    return HFEngine("tiny-random", max_batch_size=8)


@pytest.fixture(scope="session")
def smol_engine():
    from agentkit.engines.hf import HFEngine

    return HFEngine("smollm2-135m")
