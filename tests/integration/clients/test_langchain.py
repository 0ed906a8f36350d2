"""LangChain's ``ChatOpenAI`` (langchain-openai) against ``agentkit serve`` on the embedded model, unchanged:
invoke, stream, batch, bind_tools (whole and streamed), with_structured_output by JSON schema and by function
calling, and logprobs."""

import pytest
from pydantic import BaseModel

langchain_openai = pytest.importorskip("langchain_openai")
from langchain_core.tools import tool  # noqa: E402

from .conftest import KEY  # noqa: E402


class City(BaseModel):
    name: str
    country: str


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"It is sunny in {city}."


@pytest.fixture(scope="module")
def llm(smol_url):
    return langchain_openai.ChatOpenAI(
        model="smol", base_url=smol_url + "/v1", api_key=KEY, temperature=0, max_tokens=30
    )


def test_invoke_stream_and_batch(llm):
    q = "What is the capital of France?"
    whole = llm.invoke(q).content
    assert "Paris" in whole
    chunks = [c.content for c in llm.stream(q)]
    assert "".join(chunks) == whole and len(chunks) > 2
    assert llm.batch([q, "What is the capital of Germany?"])[0].content == whole


def test_bind_tools_whole_and_streamed(llm):
    forced = llm.bind_tools([get_weather], tool_choice="get_weather")
    (call,) = forced.invoke("What is the weather in Paris?").tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"}
    chunks = list(llm.bind_tools([get_weather], tool_choice="any").stream("What is the weather in Paris?"))
    merged = chunks[0]
    for c in chunks[1:]:
        merged = merged + c
    (streamed,) = merged.tool_calls
    assert (streamed["name"], streamed["args"]) == ("get_weather", {"city": "Paris"})
    assert sum(bool(c.tool_call_chunks) for c in chunks) > 2  # the arguments arrived in pieces


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_with_structured_output(llm, method):
    city = llm.bind(max_tokens=60).with_structured_output(City, method=method).invoke("The capital of France?")
    assert isinstance(city, City) and city.name and city.country


def test_logprobs(llm):
    msg = llm.bind(logprobs=True, top_logprobs=2).invoke("Hi")
    content = msg.response_metadata["logprobs"]["content"]
    assert content and all(t["logprob"] <= 0 and len(t["top_logprobs"]) == 2 for t in content)
