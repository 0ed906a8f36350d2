"""The OpenAI Agents SDK against ``agentkit serve`` on the embedded model (SmolLM2-135M), unchanged: its default
model (the Responses API) and its chat-completions model each run function tools (called, their output fed back),
a structured ``output_type`` and a streamed run. The openai client's ``responses`` resource chains a conversation
by ``previous_response_id`` on the same model."""

import asyncio

import openai
import pytest
from pydantic import BaseModel

agents = pytest.importorskip("agents")


class City(BaseModel):
    name: str
    country: str


@pytest.fixture(scope="module")
def url(smol_url):
    agents.set_tracing_disabled(True)  # nothing leaves the machine
    return smol_url


def _model(url: str, api: str):
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    if api == "responses":  # what Agent(model="smol") gets from the SDK's default provider
        return agents.models.openai_provider.OpenAIProvider(openai_client=client).get_model("smol")
    return agents.OpenAIChatCompletionsModel("smol", client)


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_function_tool_called_and_fed_back(url, api):
    cities: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        cities.append(city)
        return f"It is sunny in {city}."

    settings = agents.ModelSettings(tool_choice="required", parallel_tool_calls=False, temperature=0, max_tokens=48)
    agent = agents.Agent(
        name="weather",
        instructions="Answer briefly.",
        model=_model(url, api),
        tools=[get_weather],
        model_settings=settings,
    )
    result = asyncio.run(agents.Runner.run(agent, "What is the weather in Paris?", max_turns=4))
    kinds = [type(i).__name__ for i in result.new_items]
    assert kinds[:2] == ["ToolCallItem", "ToolCallOutputItem"] and kinds[-1] == "MessageOutputItem"
    assert cities == ["Paris"] and result.final_output
    if api == "responses":  # the second request carried the call and its output as items
        second = result.raw_responses[-1].response_id
        sync = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        items = sync.responses.input_items.list(second, order="asc").data
        assert [i.type for i in items][-2:] == ["function_call", "function_call_output"]
        assert items[-1].output == "It is sunny in Paris."


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_structured_output_type(url, api):
    settings = agents.ModelSettings(temperature=0, max_tokens=60)
    agent = agents.Agent(
        name="s", instructions="Answer in JSON.", model=_model(url, api), output_type=City, model_settings=settings
    )
    result = asyncio.run(agents.Runner.run(agent, "Name the capital of France."))
    assert isinstance(result.final_output, City) and result.final_output.name


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_streamed_run(url, api):
    async def run():
        settings = agents.ModelSettings(temperature=0, max_tokens=40)
        agent = agents.Agent(name="t", model=_model(url, api), model_settings=settings)
        streamed = agents.Runner.run_streamed(agent, "What is the capital of France?")
        deltas = []
        async for e in streamed.stream_events():
            if e.type == "raw_response_event" and getattr(e.data, "type", "") in ("response.output_text.delta",):
                deltas.append(e.data.delta)
        return streamed.final_output, deltas

    final, deltas = asyncio.run(run())
    assert "Paris" in final and "".join(deltas) == final and len(deltas) > 1


def test_previous_response_id_on_the_embedded_model(url):
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    first = client.responses.create(
        model="smol", input="What is the capital of France?", max_output_tokens=20, temperature=0
    )
    assert "Paris" in first.output_text and first.status == "completed"
    second = client.responses.create(
        model="smol", input="And of Germany?", previous_response_id=first.id, max_output_tokens=20, temperature=0
    )
    assert "Berlin" in second.output_text
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens  # the whole conversation
