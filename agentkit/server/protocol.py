"""Request, response and stream-chunk models of the OpenAI-compatible API (pydantic), as vLLM's ``protocol.py``.

Requests: unknown fields are accepted and ignored, as vLLM does; wrong types are 400 errors naming the field.
Responses: serialised with exactly the fields they were built with (``exclude_unset``) plus their ``object`` tag, so
``finish_reason: null`` is sent where OpenAI sends it and an extension (``agentkit``) only where there is one.
"""

from __future__ import annotations

from typing import Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentkit.engines.base import SamplingParams
from agentkit.engines.structured import Constraint


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

    def to_sampling_params(self, default_max: int = 256, constraint: Constraint | None = None) -> SamplingParams:
        """The engine's sampling settings for this request (OpenAI's defaults where the client sent none:
        temperature 1, top_p 1; ``default_max`` new tokens)."""
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        max_tokens = getattr(self, "max_completion_tokens", None) or self.max_tokens
        return SamplingParams(
            n=self.n,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=self.top_p or 1.0,
            top_k=max(0, self.top_k or 0),
            max_tokens=default_max if max_tokens is None else max_tokens,
            seed=self.seed,
            stop=stop,
            top_logprobs=self.top_logprobs_asked(),
            ignore_eos=self.ignore_eos,
            include_stop_str_in_output=self.include_stop_str_in_output,
            constraint=constraint,
        )

    def top_logprobs_asked(self) -> int:
        return 0

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=0)
    tools: list[ToolDef] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)

    def top_logprobs_asked(self) -> int:
        return (self.top_logprobs or 0) if self.logprobs else 0


class TokenizeRequest(_Lenient):
    """vLLM's ``POST /tokenize``: a text ``prompt`` or chat ``messages`` (through the chat template). ``model`` may
    be left out, as vLLM allows (lm-evaluation-harness's remote tokenizer sends none)."""

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: bool | None = None  # default: True for a prompt, False for messages (as vLLM)
    add_generation_prompt: bool = True


class DetokenizeRequest(_Lenient):
    model: str | None = None
    tokens: list[int]


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int] | list[list[int]]  # as OpenAI's legacy API and vLLM take it
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=20)

    def top_logprobs_asked(self) -> int:
        return self.logprobs or 0

    def prompts(self) -> list[str | list[int]]:
        """The prompts of the request: one text, one list of token ids, or a list of texts or of token-id lists
        (what lm-evaluation-harness's ``local-completions`` sends)."""
        if isinstance(self.prompt, str) or (self.prompt and isinstance(self.prompt[0], int)):
            return [self.prompt]
        return list(self.prompt)


# ---------------------------------------------------------------------------------------------- responses


class _Out(BaseModel):
    """A response object: dumped with the fields it was built with (``exclude_unset``) and its constant tags
    (``object``, a message's ``role``, a tool call's ``type``: fields typed ``Literal`` with a default)."""

    @model_validator(mode="after")
    def _tagged(self):
        for name, f in type(self).model_fields.items():
            if f.default is not None and get_origin(f.annotation) is Literal:
                self.model_fields_set.add(name)
        return self

    def sse(self) -> str:
        """This object as one server-sent event."""
        return "data: " + self.model_dump_json(exclude_unset=True) + "\n\n"


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """Every non-2xx answer (OpenAI's shape)."""

    error: ErrorInfo


class HealthResponse(_Out):
    status: Literal["ok"] = "ok"


class ModelCard(_Out):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "agentkit"
    max_model_len: int | None = None
    root: str | None = Field(None, description="a LoRA adapter: where it was loaded from")
    parent: str | None = Field(None, description="a LoRA adapter: the served model it runs on")


class ModelList(_Out):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class TokenizeResponse(_Out):
    count: int
    max_model_len: int | None
    tokens: list[int]
    token_strs: list[str] | None = None


class DetokenizeResponse(_Out):
    prompt: str


class TokenizerInfoResponse(_Out):
    """vLLM's ``GET /tokenizer_info``: what a client needs to tokenize as the server does (lm-evaluation-harness's
    ``tokenizer_backend=remote`` reads it, then calls ``/tokenize`` and ``/detokenize``)."""

    tokenizer_class: str
    eos_token: str | None
    bos_token: str | None
    pad_token: str | None
    unk_token: str | None
    chat_template: str | None
    model_max_length: int | None


class UsageInfo(_Out):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    model_calls: int | None = Field(None, description="agent services (ACE): the model calls behind this answer")

    @classmethod
    def of(cls, prompt_tokens: int, completion_tokens: int) -> UsageInfo:
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )


class FunctionCall(_Out):
    name: str
    arguments: str


class ToolCall(_Out):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class TopLogprob(_Out):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(_Out):
    content: list[TokenLogprob]


class AssistantMessage(_Out):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] | None = None
    reasoning_content: str | None = Field(None, description="the reply's reasoning (--reasoning-parser)")


class ChatChoice(_Out):
    index: int
    message: AssistantMessage
    finish_reason: str | None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionResponse(_Out):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo
    agentkit: list[dict[str, Any]] | dict[str, Any] | None = Field(
        None, description="agent models: each trajectory's trace (the tool loop), or a service's extension"
    )


class DeltaFunction(_Out):
    name: str | None = None
    arguments: str


class DeltaToolCall(_Out):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: DeltaFunction


class DeltaMessage(_Out):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[DeltaToolCall] | None = None


class ChunkChoice(_Out):
    index: int
    delta: DeltaMessage
    finish_reason: str | None = None


class ChatCompletionChunk(_Out):
    """One event of a streamed chat completion; with ``stream_options.include_usage`` every chunk carries
    ``usage`` (null but on the last, which has no choices)."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageInfo | None = None
    agentkit: dict[str, Any] | None = Field(None, description="agent models: a progress event of the tool loop")


class CompletionLogprobs(_Out):
    tokens: list[str]
    token_logprobs: list[float | None]
    text_offset: list[int]
    top_logprobs: list[dict[str, float] | None] | None


class CompletionChoice(_Out):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: str | None


class CompletionResponse(_Out):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo


# ------------------------------------------------------------------------------------- the Responses API


class ResponsesRequest(_Lenient):
    """``POST /v1/responses`` (OpenAI's Responses API as vLLM serves it). ``input`` is a text or a list of items:
    messages (``{"role", "content"}``, content a text or ``input_text`` / ``output_text`` parts), ``function_call``
    and ``function_call_output`` items, and earlier output items (``reasoning`` items are skipped). ``seed`` is a
    vLLM extension."""

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    text: dict[str, Any] | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    max_tool_calls: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    include: list[str] | None = None
    store: bool = True
    background: bool = False
    previous_response_id: str | None = None
    stream: bool = False
    metadata: dict[str, str] | None = None
    user: str | None = None
    seed: int | None = None
    truncation: Literal["disabled", "auto"] | None = None


class OutputText(_Out):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[dict[str, Any]] = Field(default_factory=list)
    logprobs: list[dict[str, Any]] | None = None


class MessageItem(_Out):
    type: Literal["message"] = "message"
    id: str
    status: Literal["in_progress", "completed", "incomplete"]
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class FunctionCallItem(_Out):
    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str
    name: str
    arguments: str
    status: Literal["in_progress", "completed", "incomplete"]


class CodeInterpreterLogs(_Out):
    type: Literal["logs"] = "logs"
    logs: str


class CodeInterpreterCallItem(_Out):
    """The agent model's python tool: one call, its code and the sandbox's output."""

    type: Literal["code_interpreter_call"] = "code_interpreter_call"
    id: str
    code: str | None
    container_id: str
    outputs: list[CodeInterpreterLogs] | None
    status: Literal["in_progress", "interpreting", "completed", "incomplete", "failed"]


class FileSearchResult(_Out):
    text: str


class FileSearchCallItem(_Out):
    """The agent model's search tool: one query and the passages it returned (as one result)."""

    type: Literal["file_search_call"] = "file_search_call"
    id: str
    queries: list[str]
    status: Literal["in_progress", "searching", "completed", "incomplete", "failed"]
    results: list[FileSearchResult] | None = None


class McpCallItem(_Out):
    """Any other tool of the agent model (an MCP server's, say): its name, arguments and output."""

    type: Literal["mcp_call"] = "mcp_call"
    id: str
    server_label: str
    name: str
    arguments: str
    output: str | None
    error: str | None
    status: Literal["in_progress", "completed", "incomplete", "failed"]


class ReasoningText(_Out):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningItem(_Out):
    """The reply's reasoning (``--reasoning-parser``), before its message or calls."""

    type: Literal["reasoning"] = "reasoning"
    id: str
    summary: list[dict[str, Any]] = Field(default_factory=list)
    content: list[ReasoningText]
    status: Literal["in_progress", "completed", "incomplete"]


OutputItem = ReasoningItem | MessageItem | FunctionCallItem | CodeInterpreterCallItem | FileSearchCallItem | McpCallItem


class ResponseUsage(_Out):
    """Built by ``of`` (no cache, no reasoning tokens to report)."""

    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int

    @classmethod
    def of(cls, input_tokens: int, output_tokens: int) -> ResponseUsage:
        return cls(
            input_tokens=input_tokens,
            input_tokens_details={"cached_tokens": 0, "cache_write_tokens": 0},
            output_tokens=output_tokens,
            output_tokens_details={"reasoning_tokens": 0},
            total_tokens=input_tokens + output_tokens,
        )


class ResponseObject(_Out):
    """A response of the Responses API (what ``POST /v1/responses`` and ``GET /v1/responses/{id}`` answer)."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["queued", "in_progress", "completed", "incomplete", "cancelled", "failed"]
    model: str
    output: list[OutputItem]
    instructions: str | None
    tools: list[dict[str, Any]]
    tool_choice: str | dict[str, Any]
    parallel_tool_calls: bool
    temperature: float | None
    top_p: float | None
    max_output_tokens: int | None
    max_tool_calls: int | None
    previous_response_id: str | None
    text: dict[str, Any]
    truncation: str
    store: bool
    background: bool
    metadata: dict[str, str]
    user: str | None
    error: dict[str, Any] | None
    incomplete_details: dict[str, Any] | None
    usage: ResponseUsage | None
    agentkit: list[dict[str, Any]] | dict[str, Any] | None = Field(
        None, description="agent models: the trajectory's trace (the tool loop)"
    )


class ResponseDeleted(_Out):
    id: str
    object: Literal["response.deleted"] = "response.deleted"
    deleted: bool


class InputItemList(_Out):
    object: Literal["list"] = "list"
    data: list[dict[str, Any]]
    first_id: str | None
    last_id: str | None
    has_more: bool
