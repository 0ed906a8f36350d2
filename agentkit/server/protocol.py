"""Request models of the OpenAI-compatible API (pydantic). Unknown fields are accepted and ignored, as vLLM does;
wrong types are 400 errors naming the field."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class FunctionDef(_Lenient):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolDef(_Lenient):
    type: Literal["function"] = "function"
    function: FunctionDef


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):  # content parts: keep the text ones
            return "".join(p.get("text", "") for p in self.content if isinstance(p, dict))
        return self.content or ""


class StreamOptions(_Lenient):
    include_usage: bool = False


class _Sampling(_Lenient):
    model: str
    n: int = Field(1, ge=1, le=64)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)
    max_tokens: int | None = Field(None, ge=0)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False  # vLLM extensions, sent by OpenAIEngine in extra_body
    include_stop_str_in_output: bool = False
    return_tokens_as_token_ids: bool = False  # logprob tokens as "token_id:N"
    # Structured outputs: OpenAI's response_format ({"type": "text" | "json_object" | "json_schema", ...}) or
    # vLLM's structured_outputs ({"json" | "regex" | "choice" | "grammar" | "json_object": ...}); checked in chat.py
    response_format: dict[str, Any] | None = None
    structured_outputs: dict[str, Any] | None = None


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=0)
    tools: list[ToolDef] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)


class TokenizeRequest(_Lenient):
    """vLLM's ``POST /tokenize``: a text ``prompt`` or chat ``messages`` (through the chat template)."""

    model: str
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: bool | None = None  # default: True for a prompt, False for messages (as vLLM)
    add_generation_prompt: bool = True


class DetokenizeRequest(_Lenient):
    model: str
    tokens: list[int]


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int]
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=20)
