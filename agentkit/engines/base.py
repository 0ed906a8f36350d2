"""The Engine protocol: batched generation and teacher-forced scoring, the same for every backend.

Logprobs and entropies are of the model's *unprocessed* next-token distribution (temperature 1, no top-k/p),
the one `score` returns too, so a sampled trajectory can be re-scored exactly. For each generated token t:

    logprob_t = log p(y_t | x, y_<t)          entropy_t = -Σ_v p(v | x, y_<t) log p(v | x, y_<t)

HFEngine returns the exact entropy over the full vocabulary; OpenAIEngine and VLLMEngine estimate it from the
top-k logprobs the server returns (a truncated sum, a lower bound when k < |V|; see `topk_entropy`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from agentkit.config import NonNegFloat, NonNegInt, PosInt, TopP, option
from agentkit.engines.structured import Constraint

Message = dict[str, Any]


@dataclass(frozen=True)
class ImagePrompt:
    """Token ids holding a vision-language model's image tokens, with the images they stand for (in order): how
    a prefix with images is continued (the agent loop's next turn), since the ids alone cannot say which image."""

    ids: list[int]
    images: list[Any]


# A prompt is raw text, a chat (list of {"role", "content"} messages; a message's content may be a list of parts,
# {"type": "text", "text"} and images: {"type": "image", "image"} or OpenAI's {"type": "image_url"}), token ids
# (for continuing a prefix), or token ids with images (``ImagePrompt``; vision-language models).
Prompt = str | list[Message] | list[int] | ImagePrompt
# "abort": the caller cancelled it (a client that went away); "error": this completion failed alone (its grammar
# could not go on; ``stop_reason`` says why) while the batch's others finished
FinishReason = Literal["stop", "length", "abort", "error"]


@dataclass
class SamplingParams:
    """Sampling settings shared by all engines (names follow vLLM / OpenAI).

    temperature 0 means greedy. ``top_k`` 0 and ``top_p`` 1 disable those filters. ``seed`` makes sampling
    reproducible per prompt: a prompt gets the same samples whatever else is in its batch. ``seeds`` (one per
    prompt) overrides it prompt by prompt: rows with equal prompts then still differ, as the agent loop needs for
    the n trajectories of one question (their turns are separate prompts). Generation stops at
    an EOS token, at any of ``stop`` (the text is cut before it unless ``include_stop_str_in_output``), or after
    ``max_tokens`` new tokens. ``entropy`` asks for per-token entropies; ``top_logprobs`` for the k most likely
    alternatives of each token (HF and vLLM; OpenAI servers cap k at 20). ``constraint`` (or, per prompt,
    ``constraints``) restricts what a completion may be: a JSON schema, any JSON object, a regex, a choice of
    strings or a grammar (``agentkit.engines.structured``); a constrained completion ends when its grammar is
    complete. ``adapter`` (or, per prompt, ``adapters``) names a LoRA adapter the engine has loaded
    (``load_adapter``): prompts for different adapters share one engine call, each row with its own.

    Per-prompt fields (``PER_PROMPT``) hold one entry per prompt. Requests that differ only in them share one
    engine call: ``batch_key`` leaves them out and ``concat`` joins them (the server's batcher does both).
    """

    # per-prompt field -> the scalar field that gives every prompt the same value when the list is None
    PER_PROMPT: ClassVar[dict[str, str | None]] = {
        "seeds": "seed",
        "constraints": "constraint",
        "adapters": "adapter",
    }

    n: PosInt = option(1, "completions per prompt (the agent loop: trajectories per task)")
    temperature: NonNegFloat = option(1.0, "sampling temperature; 0 is greedy decoding")
    top_p: TopP = option(
        1.0, "nucleus sampling: keep the smallest set of tokens whose probability sums to this (1: off)"
    )
    top_k: NonNegInt = option(0, "keep only the k most likely tokens (0: off)")
    max_tokens: NonNegInt = option(256, "new tokens per completion (the agent loop: per model turn)")
    seed: int | None = option(None, "makes sampling reproducible per prompt, whatever else is batched with it")
    seeds: list[int | None] | None = option(
        None, "one seed per prompt (overrides seed prompt by prompt)", internal=True
    )
    stop: list[str] = option([], "strings that end a completion (cut before them)")
    include_stop_str_in_output: bool = option(False, "keep the stop string that ended a completion in its text")
    ignore_eos: bool = option(False, "go on past the end-of-sequence token (benchmarks)")
    entropy: bool = option(False, "also return each generated token's entropy (exact on hf, top-k on the others)")
    top_logprobs: NonNegInt = option(0, "also return the k most likely alternatives of each token")
    constraint: Constraint | None = option(
        None, "structured output: a mapping with one of json (a schema as JSON text), regex, choice or grammar"
    )
    constraints: list[Constraint | None] | None = option(None, "one constraint per prompt", internal=True)
    adapter: str | None = option(
        None,
        "the LoRA adapter to generate with, by the name the engine loaded it under (None: the base model)",
        internal=True,
    )
    adapters: list[str | None] | None = option(None, "one adapter per prompt", internal=True)

    def problems(self) -> list[str]:
        """What is wrong with these settings as a config section (``agentkit.config.cross_checks``): a config
        always generates, so ``max_tokens`` 0 (prompt scoring, for the completions route) is refused there."""
        return ["max_tokens: 0 generates nothing; give at least 1"] if self.max_tokens == 0 else []

    def check_per_prompt(self, n_prompts: int) -> None:
        """Each per-prompt field that is set has one entry per prompt."""
        for name in self.PER_PROMPT:
            value = getattr(self, name)
            if value is not None and len(value) != n_prompts:
                raise ValueError(f"{name} has {len(value)} entries for {n_prompts} prompts; give one per prompt")

    def per_prompt(self, name: str, n_prompts: int) -> list:
        """The per-prompt field ``name`` as a list of ``n_prompts`` entries (from its scalar when unset)."""
        value = getattr(self, name)
        if value is not None:
            return list(value)
        scalar = self.PER_PROMPT[name]
        return [getattr(self, scalar) if scalar else None] * n_prompts

    def split(self, n_prompts: int) -> list[SamplingParams]:
        """One params per prompt, its per-prompt fields folded into their scalars (``seeds[i]`` → ``seed``): for
        engines that send each prompt on its own (OpenAIEngine) or take per-prompt settings (vLLM).

        Examples:
            >>> [p.seed for p in SamplingParams(seed=1, seeds=[4, None]).split(2)]
            [4, None]
        """
        self.check_per_prompt(n_prompts)
        values = {name: self.per_prompt(name, n_prompts) for name in self.PER_PROMPT}
        return [
            replace(
                self,
                **{name: None for name in self.PER_PROMPT},
                **{scalar: values[name][i] for name, scalar in self.PER_PROMPT.items() if scalar},
            )
            for i in range(n_prompts)
        ]

    def batch_key(self) -> str:
        """Equal for params that may share one engine call: every field but the per-prompt ones."""
        d = asdict(self)
        for name, scalar in self.PER_PROMPT.items():
            d.pop(name)
            if scalar:
                d.pop(scalar)
        return json.dumps(d, sort_keys=True, default=str)

    @staticmethod
    def concat(parts: list[tuple[SamplingParams, int]]) -> SamplingParams:
        """One params for the prompts of several requests, in order: ``parts`` = (params, number of prompts),
        all with the same ``batch_key``. Per-prompt fields are joined; a field no prompt sets stays None.

        >>> a, b = SamplingParams(seed=3), SamplingParams(seeds=[5, 6])
        >>> SamplingParams.concat([(a, 2), (b, 2), (SamplingParams(), 1)]).seeds
        [3, 3, 5, 6, None]
        """
        first = parts[0][0]
        if any(p.batch_key() != first.batch_key() for p, _ in parts):
            raise ValueError("only params with the same batch_key can be joined")
        joined: dict[str, Any] = {}
        for name, scalar in first.PER_PROMPT.items():
            values = [v for p, n in parts for v in p.per_prompt(name, n)]
            joined[name] = None if all(v is None for v in values) else values
            if scalar:
                joined[scalar] = None
        return replace(first, **joined)

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.max_tokens < 0:
            raise ValueError("top_k and max_tokens must be >= 0")
        if isinstance(self.stop, str):
            self.stop = [self.stop]


@dataclass
class Completion:
    """One sampled continuation. Lists are aligned with ``token_ids``."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason
    prompt_tokens: int
    entropies: list[float] | None = None
    top_logprobs: list[dict[int, float]] | None = None
    stop_reason: str | int | None = None  # the stop string or token id that ended it

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids)


class ContextLengthError(ValueError):
    """A prompt that does not fit the model's context (a server answers it with 400 ``context_length_exceeded``)."""


@dataclass
class Scored:
    """Teacher-forced continuation: its token ids and per-token logprobs (and entropies, and the k most likely
    tokens at each position, best first, if asked)."""

    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float] | None = None
    top_logprobs: list[dict[int, float]] | None = None


@runtime_checkable
class Engine(Protocol):
    """What every consumer (agent loop, server, recipes, benches) calls; they never branch on the engine's kind.

    Tokens:
        ``encode(prompt)``: a prompt's ids as the model sees them (text with the tokenizer's special tokens, a chat
        through the model's chat template with the assistant's generation prompt, ids unchanged).
        ``tokenize(text)``: plain text without special tokens (a tool result appended mid-sequence).
        ``decode(ids)``: text of ids (special tokens dropped by default). ``token_strings(ids)``: each token's
        own text (for logprob listings).
    Model: ``model_name``; ``max_model_len`` (prompt + completion tokens); ``default_stop``: stop strings the
    engine always applies (the end of a turn in templates without a special end token).
    Work: ``generate`` and ``score`` (batched; see the dataclasses above).
    Life cycle: ``stats()`` counts since creation, keys an engine cannot know are left out: ``requests``
    (generate calls), ``prompt_tokens``, ``completion_tokens``, ``prefill_tokens`` (prompt tokens run through
    the model), ``scored_tokens`` (tokens ``score`` ran through the model), ``cached_prompt_tokens`` (prompt
    tokens served from a cache). ``load_weights(model, path)`` serves new weights from now on (a training round's policy): a loaded model, its saved directory, or both;
    each engine takes what it can use, and stored keys/values of the old weights are dropped.
    ``close()`` frees what the engine holds (memory, processes, connections); it is safe to call twice.
    """

    model_name: str
    max_model_len: int
    default_stop: list[str]

    def encode(self, prompt: Prompt) -> list[int]:
        """A prompt's token ids as the model sees them.

        Args:
            prompt: text (the tokenizer's special tokens added), a chat (rendered by the model's chat template,
                with the assistant's generation prompt), or token ids (returned unchanged).

        Returns:
            The token ids.

        Raises:
            ValueError: an empty prompt, or images for a text-only model.
        """
        ...

    def tokenize(self, text: str) -> list[int]:
        """Plain text's token ids, without special tokens (a tool result appended mid-sequence).

        Args:
            text: the text.

        Returns:
            The token ids.
        """
        ...

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        """The text of token ids.

        Args:
            ids: token ids.
            skip_special_tokens: drop special tokens (end of turn, padding) from the text.

        Returns:
            The text.
        """
        ...

    def token_strings(self, ids: list[int]) -> list[str]:
        """Each token's own text, for logprob listings.

        Args:
            ids: token ids.

        Returns:
            One string per id.
        """
        ...

    def generate(self, prompts: list[Prompt], params: SamplingParams) -> list[list[Completion]]:
        """Sample completions of a batch of prompts.

        Args:
            prompts: texts, chats or token ids (``encode`` says how each is read).
            params: the sampling settings; per-prompt fields (``seeds``, ``constraints``) hold one entry per
                prompt.

        Returns:
            ``params.n`` completions per prompt, in prompt order.

        Raises:
            ContextLengthError: a prompt does not fit the context.
        """
        ...

    def score(
        self,
        contexts: list[Prompt],
        continuations: list[str | list[int]],
        entropy: bool = False,
        top_logprobs: int = 0,
    ) -> list[Scored]:
        """Teacher-forced log-probabilities of each continuation after its context.

        Args:
            contexts: one prompt per continuation (read as ``encode`` reads it).
            continuations: text (tokenized without special tokens) or token ids.
            entropy: also return each position's entropy of the next-token distribution.
            top_logprobs: also return the k most likely tokens at each position with their logprobs, best first
                (what a server's ``echo`` with ``logprobs=k`` reports for the prompt).

        Returns:
            One ``Scored`` per continuation: its ids and their logprobs (and entropies, and top-k alternatives).
        """
        ...

    def stats(self) -> dict[str, int]:
        """Counts since the engine was created (the keys the class docstring lists that this engine can know).

        Returns:
            Counter name → value.
        """
        ...

    def load_weights(self, model: Any = None, path: str | None = None) -> None:
        """Serve new weights from now on (a training round's policy); stored keys/values are dropped.

        Args:
            model: a loaded model whose weights to serve.
            path: a saved model directory (engines in another process load from it).
        """
        ...

    def close(self) -> None:
        """Free what the engine holds (memory, processes, connections); safe to call twice."""
        ...


class LocalTokenizer:
    """The token half of the Engine protocol from a transformers tokenizer (``self.tokenizer``)."""

    tokenizer: Any

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_strings(self, ids: list[int]) -> list[str]:
        return [self.tokenizer.decode([t]) for t in ids]

    def continuation_ids(self, continuations: list[str | list[int]]) -> list[list[int]]:
        """``score``'s continuations as ids: text is tokenized without special tokens."""
        return [list(c) if not isinstance(c, str) else self.tokenize(c) for c in continuations]


def encode_prompt(tokenizer, prompt: Prompt) -> list[int]:
    """Token ids of a prompt: text gets the tokenizer's special tokens, a chat goes through the chat template,
    token ids pass through. Images are refused: a text-only model cannot see them."""
    if isinstance(prompt, str):
        return tokenizer(prompt).input_ids
    if not prompt:
        raise ValueError("empty prompt")
    if isinstance(prompt, ImagePrompt) or image_parts(prompt):
        raise ValueError("the prompt has images but this model is text-only: use a vision-language model")
    if isinstance(prompt[0], int):
        return list(prompt)  # type: ignore[arg-type]
    text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


_TURN = "AGENTKIT-TURN-7f3a"  # stands for the model's turn, whose own text is already in the sequence


def tool_turn_suffix(tokenizer, results: list[tuple[str, str]]) -> str:
    """The text the chat template puts after an assistant turn that called tools: its end-of-turn, the results
    as tool messages (``(tool name, output)`` each), and the next assistant turn's opening. For chat-style tool
    turns (``AgentConfig.tool_turns="chat"``), what TRL's ``GRPOTrainer(tools=…)`` appends too.

    >>> tool_turn_suffix(tok, [("search", "Paris")])  # Qwen 2.5's template  # doctest: +SKIP
    '<|im_end|>\\n<|im_start|>user\\n<tool_response>\\nParis\\n</tool_response><|im_end|>\\n<|im_start|>assistant\\n'
    """
    from agentkit.errors import AgentkitError

    chat = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _TURN}]
    tools = [{"role": "tool", "name": name, "content": out} for name, out in results]
    try:
        text = tokenizer.apply_chat_template(chat + tools, add_generation_prompt=True, tokenize=False)
    except Exception as e:  # jinja's own errors: templates raise on roles they do not know
        raise AgentkitError(
            f"the chat template cannot render tool messages: {e}", "use tool_turns='inline' with this model"
        ) from e
    if _TURN not in text or any(out.strip() not in text for _, out in results):
        raise AgentkitError(
            "the chat template drops the assistant's text or the tool results", "use tool_turns='inline'"
        )
    return text[text.index(_TURN) + len(_TURN) :]


def topk_entropy(logprobs: list[float]) -> float:
    """Entropy estimate from the top-k logprobs only: -Σ_{i≤k} p_i log p_i (unnormalised, as Tool-Light does).

    It ignores the tail mass, so it is a lower bound on the entropy of the tail-free part and approaches the exact
    value as k grows or the distribution sharpens.

    >>> round(topk_entropy([math.log(0.5), math.log(0.5)]), 4)
    0.6931
    """
    return float(-sum(math.exp(lp) * lp for lp in logprobs if lp > -math.inf))


def image_parts(messages: Prompt) -> list[dict[str, Any]]:
    """The image parts of a chat's messages, in order: ``{"type": "image", "image": PIL image, PNG/JPEG bytes or a
    path}`` and OpenAI's ``{"type": "image_url", "image_url": {"url": "data:…;base64,…"}}``. Anything but a chat
    has none."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return []
    return [
        part
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, dict) and part.get("type") in ("image", "image_url")
    ]


def chat_images(messages: Prompt) -> list[Any]:
    """The images of a chat (``image_parts``) as PIL images."""
    return [load_image(p) for p in image_parts(messages)]


def load_image(part: dict[str, Any]):
    """One image part as a PIL image (RGB)."""
    import base64
    import io

    from PIL import Image

    if part["type"] == "image_url":
        url = part["image_url"]["url"] if isinstance(part["image_url"], dict) else part["image_url"]
        if not url.startswith("data:"):
            raise ValueError(f"image_url {url[:40]!r}: only data: URLs are read (nothing is downloaded)")
        src: Any = io.BytesIO(base64.b64decode(url.partition(",")[2]))
    else:
        src = part.get("image")
        if src is None:
            raise ValueError("an image part without its image (fill it, e.g. with TRL's prepare_multimodal_messages)")
        if isinstance(src, Image.Image):
            return src.convert("RGB")
        src = io.BytesIO(src) if isinstance(src, (bytes, bytearray)) else src
    return Image.open(src).convert("RGB")
