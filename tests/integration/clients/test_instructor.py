"""``instructor`` over the openai client against ``agentkit serve`` on the embedded model, unchanged: a pydantic
``response_model`` through tools and through JSON schema, and partial objects streamed."""

import openai
import pytest
from pydantic import BaseModel

instructor = pytest.importorskip("instructor")

from .conftest import KEY  # noqa: E402

ASK = [{"role": "user", "content": "The capital of France?"}]


class City(BaseModel):
    name: str
    country: str


def _client(url: str, mode):
    return instructor.from_openai(openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0), mode=mode)


@pytest.mark.parametrize("mode", ["TOOLS", "JSON_SCHEMA"])
def test_response_model(smol_url, mode):
    client = _client(smol_url, getattr(instructor.Mode, mode))
    city = client.chat.completions.create(model="smol", response_model=City, messages=ASK, temperature=0, max_tokens=60)
    assert isinstance(city, City) and city.name and city.country


def test_partial_streaming(smol_url):
    client = _client(smol_url, instructor.Mode.TOOLS)
    parts = list(
        client.chat.completions.create_partial(
            model="smol", response_model=City, messages=ASK, temperature=0, max_tokens=60
        )
    )
    assert len(parts) > 3 and parts[0].name is None  # objects filled in as the arguments stream
    assert City.model_validate(parts[-1].model_dump()).name  # the last one complete
