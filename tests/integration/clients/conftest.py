"""One ``agentkit serve`` app on the embedded model (SmolLM2-135M) on loopback, for the client libraries' tests."""

import pytest

from agentkit.server import create_app
from agentkit.testing.servers import serve_in_thread

KEY = "sk-test"


@pytest.fixture(scope="session")
def smol_url(smol_engine):
    """The server's root URL; the model is served as ``smol``, the key is ``KEY``."""
    with serve_in_thread(create_app(smol_engine, "smol", api_key=KEY)) as url:
        yield url
