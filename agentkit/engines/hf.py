"""HFEngine: the embedded default engine, a batched decode loop over any transformers causal LM.

Why not ``model.generate``: one loop here returns the exact per-token entropy from the logits it already has
(no second forward pass), keeps the KV cache in growing buffers instead of re-concatenating it every step,
prefills each distinct prompt once for its ``n`` samples, drops finished rows from the batch, reuses stored keys/values
of earlier sequences, and at small batches checks prompt-lookup drafts in the same forward pass.
``agentkit bench engine`` measures the effect against ``model.generate``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from agentkit.engines import attention, decoder
from agentkit.engines.base import Completion, ContextLengthError, LocalTokenizer, Prompt, SamplingParams, Scored
from agentkit.engines.kv import (
    growing_only,
    make_cache,
    merge_right_aligned,
    repeat_rows,
    select_rows,
    snapshot_row,
    stack_rows,
)
from agentkit.engines.packed import Trunk, budget_batches, group_trunks, pack
from agentkit.engines.prefix_cache import PrefixCache
from agentkit.engines.sampling import sample_next
from agentkit.engines.streaming import DeltaStream, TextCallback
from agentkit.engines.structured import GrammarCompiler, RowGrammars
from agentkit.models import load_model, stop_strings_for
from agentkit.models.catalog import DEFAULT_CHAT_MODEL

# attention kernels on CUDA: all but cuDNN (see HFEngine._forward)
_CUDA_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class HFEngine(LocalTokenizer):
    """Generate and score with a transformers model.

    Args:
        model: a catalog name (``agentkit models list``), a local directory, a hub id, or a loaded model.
        tokenizer: required when ``model`` is a loaded model.
        name: the model's name (default: ``model`` when it is a name, else the loaded model's ``name_or_path``);
            it picks the catalog's stop strings.
        dtype: the weights' dtype (``float32``; ``bfloat16`` on a GPU).
        device: ``cpu``, ``cuda``… to move the model to (default: where transformers loads it, the CPU).
        max_model_len: the context (default: the model's).
        max_batch_size: most sequences decoded together (prompts × n are split into micro-batches).
        score_budget_mb: memory budget for the ``[B, T, V]`` logits of one scoring micro-batch.
        prefix_cache_mb: memory for the keys/values of finished sequences, so that a prompt continuing one
            (the agent's next turn) encodes only its new tokens; 0 turns it off.
        share_prefix: encode the longest common prefix of a call's prompts (a shared system prompt) once, and
            in ``score`` encode contexts that are prefixes of one another (a trajectory after each of its turns)
            once, scoring every continuation over their keys/values; False encodes every prompt in full (a
            baseline for benchmarks).
        speculate: draft tokens per row and step by prompt lookup (``_draft``), checked in the same forward pass;
            0 turns it off. Outputs keep their distribution (greedy: the same tokens).
        decode_dtype: ``bfloat16`` reads the decoder's linear weights in bf16 in decode steps of at most
            ``decode_rows`` rows, on a CPU, for Llama-family models (``agentkit.engines.decoder``; logprobs and
            entropies within 0.1 nats of fp32, so greedy outputs can part at near-ties); ``float32`` (the default)
            reads fp32 throughout.
        decode_rows: the widest decode step (rows × tokens fed) that takes the ``decode_dtype`` path (1: on a CPU
            without bf16 instructions bf16 wins at 1 row and loses to the fp32 step from 4, ``bench engine``).
        speculate_tokens: speculate only while rows × (speculate + 1) is at most this (the default: batches of
            1–4), and only at steps where every live row has drafts: a batch takes as many steps as its slowest
            row. A CPU decode step reads every weight whatever its width, so a few more tokens cost little
            (SmolLM2 here: 4 tokens per row cost 1.4× one at batch 1–4, 1.6× at batch 8).
    """

    def __init__(
        self,
        model=DEFAULT_CHAT_MODEL,
        tokenizer=None,
        *,
        name: str | None = None,
        dtype: str = "float32",
        device: str | None = None,
        max_batch_size: int = 64,
        score_budget_mb: int = 512,
        max_model_len: int | None = None,
        prefix_cache_mb: int = 1024,
        share_prefix: bool = True,
        speculate: int = 3,
        speculate_tokens: int = 16,
        decode_dtype: str = "float32",
        decode_rows: int = 1,
    ):
        self._options = dict(
            dtype=dtype,
            device=device,
            max_batch_size=max_batch_size,
            score_budget_mb=score_budget_mb,
            max_model_len=max_model_len,
            prefix_cache_mb=prefix_cache_mb,
            share_prefix=share_prefix,
            speculate=speculate,
            speculate_tokens=speculate_tokens,
            decode_dtype=decode_dtype,
            decode_rows=decode_rows,
        )
        if isinstance(model, str):
            self.model_name = name or model
            self.model, self.tokenizer = load_model(model, dtype=dtype, device=device)
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer with a loaded model")
            self.model, self.tokenizer = model.eval(), tokenizer
            self.model_name = name or getattr(model.config, "name_or_path", "") or type(model).__name__
            if self.tokenizer.pad_token is None:
                self.tokenizer.pad_token = self.tokenizer.eos_token
        self.default_stop = stop_strings_for(self.model_name, self.tokenizer)
        self.counts = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.share_prefix = share_prefix
        self.speculate, self.speculate_tokens = speculate, speculate_tokens
        self.drafted = self.draft_hits = 0  # draft tokens fed and kept
        self.prefill_tokens = 0  # prompt tokens run through the model so far (cache hits excluded)
        self.prefill_seconds = 0.0  # time spent encoding prompts (the share of the work a prefix cache can save)
        self.scored_tokens = 0  # tokens ``score`` ran through the model (a packed trunk's tokens once)
        self.device = next(self.model.parameters()).device
        # transformers renamed forward's `past_key_values` to `cache` (5.2x; the old name warns, then goes away).

        self._cache_kw = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        self.max_batch_size = max_batch_size
        self.score_budget = score_budget_mb * 2**20
        self.max_model_len = max_model_len or getattr(self.model.config, "max_position_embeddings", 2048)
        self.eos_ids = self._eos_ids()
        self.pad_id = self.tokenizer.pad_token_id
        self.prefix_cache = PrefixCache(prefix_cache_mb) if prefix_cache_mb > 0 else None
        self._compiler: GrammarCompiler | None = None
        self.adapters: dict[str, str] = {}  # LoRA adapters served per row (load_adapter): name -> path
        self.decode_dtype, self.decode_rows = decode_dtype, decode_rows
        self._prepare_model()

    def _prepare_model(self) -> None:
        """On a CPU: grouped-query attention without copying the cache under a mask (``agentkit.engines.attention``,
        the same results), and for Llama-family models the compact decode step (``agentkit.engines.decoder``:
        the same logits in fp32), which holds the ``decode_dtype`` path (checked: an fp32 model on a CPU)."""
        self._decoder = None
        if self.device.type == "cpu":
            attention.use(self.model)
        low = None if self.decode_dtype == "float32" else self.decode_dtype
        if low is not None and (self.device.type != "cpu" or next(self.model.parameters()).dtype != torch.float32):
            raise ValueError(
                f"decode_dtype={self.decode_dtype!r} is for an fp32 model on a CPU; on a GPU load the model in "
                "that dtype instead (dtype=...)"
            )
        why = decoder.unsupported(self.model)
        if low is not None and why is not None:
            raise ValueError(
                f"decode_dtype={self.decode_dtype!r} runs in the compact decode step, which does not take {why}"
            )
        if self.device.type == "cpu" and why is None:
            self._decoder = decoder.CompactDecoder(self.model, low, self.decode_rows)

    def _decode_step(self, adapters: list[str | None], fed, mask, positions, cache) -> torch.Tensor:
        """One decode step's logits ``[R, J, V]``: the compact step where it applies (no adapters served, the
        layers it was built on), else the model's forward pass."""
        if self._decoder is not None and not self.adapters and self._decoder.current():
            return self._decoder(fed, mask, positions, cache)
        out = self._forward(
            adapters,
            input_ids=fed,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            **{self._cache_kw: cache},
        )
        return out.logits

    def _forward(self, adapters: list[str | None] | None = None, **inputs):
        """One forward pass; ``adapters``: each row's LoRA adapter (None: the base model), when adapters are
        loaded (PEFT's mixed-batch LoRA: every row through its own adapter in the same pass). On CUDA,
        scaled-dot-product attention avoids cuDNN's kernel: it builds an execution plan for each new sequence
        length, about 50 ms apiece, and decoding meets a new length every step (an H200, torch 2.11: 20 tokens/s
        at batch 1 with it, see docs/results/gpu-check)."""
        if self.adapters:
            rows = inputs["input_ids"].shape[0]
            inputs["adapter_names"] = [a or "__base__" for a in (adapters or [None] * rows)]
        if self.device.type != "cuda":
            return self.model(**inputs)
        with sdpa_kernel(_CUDA_ATTENTION):
            return self.model(**inputs)

    # ---- LoRA adapters ------------------------------------------------------------------------------------
    def load_adapter(self, name: str, path: str) -> None:
        """Serve the LoRA adapter saved at ``path`` (PEFT's ``save_pretrained``) as ``name``: a request's
        ``SamplingParams.adapter`` picks it, row by row. The base weights are shared; the prefix cache keeps only
        base-model rows."""
        from peft import PeftConfig, PeftModel

        if not isinstance(name, str) or not name or name == "__base__" or name in self.adapters:
            raise ValueError(f"adapter name {name!r} is taken or not a name")
        try:
            config = PeftConfig.from_pretrained(path)
        except Exception as e:  # noqa: BLE001 - a wrong path or a full model: one line that says which
            raise ValueError(f"{path} is not a PEFT adapter directory ({type(e).__name__}: {e})") from None
        if config.peft_type != "LORA":
            raise ValueError(f"{path} is a {config.peft_type} adapter; only LoRA adapters are served per row")
        if isinstance(self.model, PeftModel):
            self.model.load_adapter(path, adapter_name=name)
        else:
            self.model = PeftModel.from_pretrained(self.model, path, adapter_name=name).eval()
        self.model.eval()
        self.adapters[name] = str(path)

    def unload_adapter(self, name: str) -> None:
        """Stop serving adapter ``name`` (its weights are freed); an unknown name is a ``KeyError``."""
        if name not in self.adapters:
            raise KeyError(name)
        del self.adapters[name]
        if self.adapters:
            self.model.delete_adapter(name)
        else:  # the last one: back to the plain model
            self.model = self.model.unload().eval()

    def _adapters(self, params: SamplingParams, n_prompts: int) -> list[str | None]:
        names = params.per_prompt("adapters", n_prompts)
        unknown = next((a for a in names if a is not None and a not in self.adapters), None)
        if unknown is not None:
            raise ValueError(f"adapter {unknown!r} is not loaded (loaded: {', '.join(self.adapters) or 'none'})")
        return names

    # ---- tokenisation -------------------------------------------------------------------------------------
    def _eos_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id}
        for src in (getattr(self.model, "generation_config", None), self.model.config):
            e = getattr(src, "eos_token_id", None) if src is not None else None
            ids.update(e if isinstance(e, (list, tuple)) else [e])
        return {i for i in ids if i is not None}

    def variant(self, **options) -> HFEngine:
        """Another engine on the same weights and tokenizer with some options changed (``prefix_cache_mb=0``:
        the baseline of a benchmark); its statistics are its own."""
        return HFEngine(self.model, self.tokenizer, name=self.model_name, **{**self._options, **options})

    # ---- the rest of the Engine protocol ------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        out = {
            **self.counts,
            "prefill_tokens": self.prefill_tokens,
            "prefill_seconds": round(self.prefill_seconds, 3),
            "scored_tokens": self.scored_tokens,
            "draft_tokens": self.drafted,
            "draft_tokens_kept": self.draft_hits,
        }
        if self.prefix_cache is not None:
            out["cached_prompt_tokens"] = self.prefix_cache.reused_tokens
        return out

    def load_weights(self, model=None, path: str | None = None) -> None:
        """Serve ``model`` (the object itself: training's later updates are served too) or the model saved at
        ``path``; stored keys/values are dropped."""
        if model is None:
            if path is None:
                raise ValueError("load_weights needs a model or a path")
            from agentkit.models import load_model

            model, _ = load_model(str(path), dtype=self._options["dtype"], device=self._options["device"])
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self._prepare_model()
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def close(self) -> None:
        """Drop stored keys/values (the weights belong to whoever passed them in, or go with this object)."""
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def _left_pad(self, seqs: Sequence[list[int]]):
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            if s:
                ids[i, width - len(s) :] = torch.tensor(s)
                mask[i, width - len(s) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(self.device), mask.to(self.device), pos.to(self.device)

    # ---- generation ---------------------------------------------------------------------------------------
    def generate(
        self, prompts: list[Prompt], params: SamplingParams | None = None, on_text: TextCallback | None = None
    ) -> list[list[Completion]]:
        """Sample ``params.n`` completions for each prompt; returns them grouped per prompt, in order.

        ``on_text(prompt_index, sample_index, delta)`` receives each completion's text as it is generated (text
        that could still turn out to be part of a stop string is held back until it cannot).
        """
        job = self.start(prompts, params, on_text)
        while not job.step():
            pass
        return job.result()

    def start(
        self, prompts: list[Prompt], params: SamplingParams | None = None, on_text: TextCallback | None = None
    ) -> GenerationJob:
        """``generate`` one decode step at a time: ``job.step()`` runs the next forward pass (a prefill or one
        decode step) and says whether the job is done, ``job.result()`` is what ``generate`` returns, and
        ``job.cancel(prompt_indices)`` ends those prompts' samples at the next step (``finish_reason="abort"``).
        A server interleaves the steps of several jobs, so a short request is not held behind a long one
        (``agentkit.server.serving.Batcher``). Bad prompts raise here, before any step."""
        params = params or SamplingParams()
        params.check_per_prompt(len(prompts))
        encoded = [self.encode(p) for p in prompts]
        vocab = self.model.config.get_text_config().vocab_size
        for i, ids in enumerate(encoded):
            if len(ids) >= self.max_model_len:
                raise ContextLengthError(
                    f"prompt {i} has {len(ids)} tokens; the model's context is {self.max_model_len}"
                )
            if ids and not 0 <= min(ids) <= max(ids) < vocab:
                bad = next(t for t in ids if not 0 <= t < vocab)
                raise ValueError(f"prompt {i} has the token id {bad}, outside the vocabulary (0..{vocab - 1})")
        self._adapters(params, len(prompts))  # an unknown adapter fails here, before any step
        cancelled: set[int] = set()
        return GenerationJob(self._steps(encoded, params, on_text, cancelled), cancelled)

    @torch.inference_mode()
    def _steps(self, encoded: list[list[int]], params: SamplingParams, on_text, cancelled: set[int]):
        """The generator behind ``start``: yields before each forward pass, returns the completions."""
        yield
        self._check_weights()
        self.counts["requests"] += 1
        self.counts["prompt_tokens"] += sum(map(len, encoded))
        # Sequences (prompt index, sample index), longest prompts first so micro-batches share similar lengths.
        seqs = sorted(
            ((i, j) for i in range(len(encoded)) for j in range(params.n)),
            key=lambda s: (-len(encoded[s[0]]), s[0], s[1]),
        )
        out: list[list[Completion | None]] = [[None] * params.n for _ in encoded]
        stream = DeltaStream(self.tokenizer, on_text, params.stop + self.default_stop) if on_text else None
        for start in range(0, len(seqs), self.max_batch_size):
            chunk = seqs[start : start + self.max_batch_size]
            comps = yield from self._generate_batch(encoded, chunk, params, stream, cancelled)
            for (i, j), comp in zip(chunk, comps):
                out[i][j] = comp
                self.counts["completion_tokens"] += comp.completion_tokens
                if stream:
                    stream.finish((i, j), comp.text)
        return out

    def _prefill(self, prompts: list[list[int]], headroom: int = 0, adapters: list[str | None] | None = None):
        """Encode the prompts; returns (cache, last logits [U, V], attention mask [U, L], last positions [U, 1]).
        The cache keeps ``headroom`` free slots per row for the tokens to be decoded; ``adapters``: each prompt's
        LoRA adapter (None: the base model; the savings below then apply to base-model prompts, and a common
        prefix is shared only by prompts with one adapter).

        Three savings over one padded forward pass, all exact:
        - a prompt that continues a sequence this engine finished earlier (an agent's next turn) starts from
          that sequence's stored keys/values (``PrefixCache``): only the new tokens are encoded;
        - the longest common prefix of the other prompts (a shared system prompt) is encoded once;
        - the remaining suffixes are encoded in groups of similar length (``_length_groups``).
        The parts are merged right-aligned. Positions come from the mask, so the padding between parts of a
        row is invisible to the model.
        """
        cfg = self.model.config
        adapters = adapters or [None] * len(prompts)
        first = make_cache(cfg, headroom)
        mergeable = growing_only(first)  # sliding-window layers (Gemma 3) cannot be merged: one part then
        hits = {}
        if self.prefix_cache is not None and mergeable:
            # A stored sequence must share more than the batch's own common prefix (a system prompt), which the
            # shared-prefix path below encodes once for all rows anyway.
            floor = (_common_prefix_len(prompts) if len(prompts) > 1 else 0) + 16
            hits = {
                i: f
                for i, p in enumerate(prompts)
                if adapters[i] is None and (f := self.prefix_cache.longest(p, min_shared=floor)) is not None
            }
        parts = []
        if hits:
            rows = sorted(hits)
            suffixes = [prompts[r][len(hits[r][0]) :] for r in rows]
            cache, past = stack_rows([hits[r][1] for r in rows], cfg, headroom + max(map(len, suffixes)))
            parts.append(self._encode_part(cache, rows, past, suffixes, [None] * len(rows)))
        rest = [i for i in range(len(prompts)) if i not in hits]
        if rest:
            parts += self._encode_fresh(
                [prompts[i] for i in rest], rest, first, mergeable, headroom, [adapters[i] for i in rest]
            )
        if len(parts) == 1:
            cache, rows, mask, logits, pos = parts[0]
            return cache, logits, mask, pos
        n, width = len(prompts), max(p[2].shape[1] for p in parts)
        mask = torch.zeros(n, width, dtype=torch.long, device=self.device)
        logits = torch.empty(n, parts[0][3].shape[-1], dtype=parts[0][3].dtype, device=self.device)
        pos = torch.empty(n, 1, dtype=torch.long, device=self.device)
        for _, rows, m, lg, p in parts:
            idx = torch.tensor(rows, device=self.device)
            mask[idx, width - m.shape[1] :], logits[idx], pos[idx] = m, lg, p
        return merge_right_aligned([(p[0], p[1]) for p in parts], n, cfg, headroom), logits, mask, pos

    def _encode_part(
        self, cache, rows: list[int], past_mask: torch.Tensor, suffixes: list[list[int]], adapters: list[str | None]
    ):
        """Encode ``suffixes`` after what ``cache`` holds (``past_mask`` marks its valid slots), each row through
        its adapter."""
        ids, tail_mask, _ = self._left_pad(suffixes)
        self.prefill_tokens += int(tail_mask.sum())
        mask = torch.cat([past_mask.to(tail_mask.device), tail_mask], dim=1)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self._forward(
            adapters,
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos[:, past_mask.shape[1] :],
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kw: cache},
        )
        return cache, rows, mask, out.logits[:, -1], pos[:, -1:]

    def _encode_fresh(
        self,
        prompts: list[list[int]],
        rows: list[int],
        first,
        mergeable: bool,
        headroom: int = 0,
        adapters: list[str | None] | None = None,
    ):
        cfg = self.model.config
        adapters = adapters or [None] * len(prompts)
        one_adapter = len(set(adapters)) == 1  # a shared head's keys/values belong to one adapter
        shared = _common_prefix_len(prompts) if len(prompts) > 1 and self.share_prefix and one_adapter else 0
        shared = min(shared, min(len(p) for p in prompts) - 1)
        if shared < 8:  # not worth a separate forward call
            shared = 0
        head = None
        if shared:
            head, done = self._shared_head(
                prompts[0][:shared], mergeable and adapters[0] is None, headroom + max(len(p) for p in prompts) - shared
            )
            if done < shared:
                ids = torch.tensor([prompts[0][done:shared]], device=self.device)
                self.prefill_tokens += shared - done
                self._forward(
                    adapters[:1],
                    input_ids=ids,
                    attention_mask=torch.ones(1, shared, dtype=torch.long, device=self.device),
                    position_ids=torch.arange(done, shared, device=self.device)[None],
                    use_cache=True,
                    logits_to_keep=1,
                    **{self._cache_kw: head},
                )
        groups = _length_groups([len(p) - shared for p in prompts]) if mergeable else [list(range(len(prompts)))]
        parts = []
        for g, grp in enumerate(groups):
            if head is None:
                cache = first if g == 0 else make_cache(cfg, headroom)
            elif len(groups) == 1:
                cache = head
                select_rows(cache, torch.zeros(len(grp), dtype=torch.long, device=self.device))
            else:
                cache = repeat_rows(head, len(grp), cfg, headroom + max(len(prompts[j]) for j in grp) - shared)
            past = torch.ones(len(grp), shared, dtype=torch.long, device=self.device)
            parts.append(
                self._encode_part(
                    cache, [rows[j] for j in grp], past, [prompts[j][shared:] for j in grp], [adapters[j] for j in grp]
                )
            )
        return parts

    def _shared_head(self, prefix: list[int], mergeable: bool, headroom: int = 0):
        """A one-row cache for the prompts' common prefix, and how many of its tokens it already holds: the stored
        keys/values of an earlier sequence that began the same way (a system prompt and few-shot examples sent
        with every call) when there is one, else an empty cache. ``headroom``: free slots for what follows."""
        hit = (
            self.prefix_cache.longest(prefix + [-1], min_shared=8)
            if self.prefix_cache is not None and mergeable
            else None
        )
        if hit is None:
            return make_cache(self.model.config, headroom), 0
        return stack_rows([hit[1]], self.model.config, headroom)[0], len(hit[0])

    def _generate_batch(
        self,
        encoded: list[list[int]],
        seqs: list[tuple[int, int]],
        params: SamplingParams,
        stream: DeltaStream | None = None,
        cancelled: set[int] = frozenset(),  # type: ignore[assignment]
    ):
        """A generator: yields before each forward pass, returns the micro-batch's completions."""
        unique = list(dict.fromkeys(i for i, _ in seqs))
        budget = [min(params.max_tokens, self.max_model_len - len(encoded[i])) for i, _ in seqs]
        # Free cache slots for the decode steps (beyond 512 the buffers grow by doubling, to bound the memory).
        names = self._adapters(params, len(encoded))  # each prompt's adapter (None: the base model)
        yield
        started = time.perf_counter()
        cache, logits, mask, pos = self._prefill(
            [encoded[i] for i in unique], max(0, min(max(budget), 512)) + 1, [names[i] for i in unique]
        )
        self.prefill_seconds += time.perf_counter() - started
        # Each distinct prompt was encoded once; repeat its cache rows for its samples (one sample each: the rows
        # are already in place, and copying every layer's buffers would cost ~0.2 s at batch 64).
        order = [unique.index(i) for i, _ in seqs]
        if order != list(range(len(unique))):
            expand = torch.tensor(order, device=self.device)
            select_rows(cache, expand)
            logits, mask, pos = logits[expand], mask[expand], pos[expand]
        seeds = params.per_prompt("seeds", len(encoded))
        gens = _generators([seeds[i] for i, _ in seqs], [j for _, j in seqs], self.device)
        constraints = params.per_prompt("constraints", len(encoded))
        grammar = self._grammars([constraints[i] for i, _ in seqs])
        stop = [s for s in (params.stop or []) + self.default_stop if s]
        tail = max((len(s) for s in stop), default=0) + 4
        rows = list(range(len(seqs)))  # active row -> sequence index
        toks: list[list[int]] = [[] for _ in seqs]
        lps: list[list[float]] = [[] for _ in seqs]
        ents: list[list[float]] = [[] for _ in seqs]
        tops: list[list[dict[int, float]]] = [[] for _ in seqs]
        finish: list[tuple[str, str | int | None] | None] = [None] * len(seqs)
        for s, b in enumerate(budget):
            if b <= 0:
                finish[s] = ("length", None)
        # Each step walks the logits of the tokens fed last: the row's last token, then its draft tokens (prompt
        # lookup, see _draft). A draft token counts only if it is what the row samples at that place: sampling
        # y ~ p and keeping the draft iff y equals it is exactly sampling from p, so outputs keep their
        # distribution (greedy: the same tokens), and a row's random draws do not depend on the rest of the batch.
        logits = logits[:, None]  # [R, J, V]: J = 1 + drafts fed
        drafts: list[list[int]] = [[] for _ in rows]
        real = [0] * len(rows)  # how many of a row's drafts are its own (the rest pad it to the batch's width)
        drafted, kept = [0] * len(seqs), [0] * len(seqs)  # per sequence: its own draft tokens fed and kept
        while True:
            for s in rows:
                if finish[s] is None and seqs[s][0] in cancelled:
                    finish[s] = ("abort", None)
            live = [r for r, s in enumerate(rows) if finish[s] is None]
            if not live:
                break
            if len(live) < len(rows) and len(rows) - len(live) >= max(1, len(rows) // 8):
                keep = torch.tensor(live, device=self.device)
                select_rows(cache, keep)
                logits, mask, pos = logits[keep], mask[keep], pos[keep]
                gens = [gens[r] for r in live] if gens else gens
                rows, drafts, real = [rows[r] for r in live], [drafts[r] for r in live], [real[r] for r in live]
            width = logits.shape[1]
            walking = [finish[s] is None for s in rows]
            accepted, last, ended = [0] * len(rows), [self.pad_id] * len(rows), []
            for j in range(width):
                idx = [r for r, w in enumerate(walking) if w]
                if not idx:
                    break
                logp = (logits[:, j] if len(idx) == len(rows) else logits[idx, j]).float().log_softmax(-1)
                probs = logp.exp()
                # constrained rows draw from their grammar's allowed tokens; logprobs stay the model's own
                draw = grammar.mask([rows[r] for r in idx], logp) if grammar else logp
                nxt = sample_next(
                    draw,
                    params.temperature,
                    params.top_k,
                    params.top_p,
                    [gens[r] for r in idx] if gens else None,
                    probs=probs if draw is logp else None,
                )
                chosen = logp.gather(-1, nxt[:, None])[:, 0].tolist()
                ent = (-(probs * logp).sum(-1)).tolist() if params.entropy else None
                top = logp.topk(params.top_logprobs, -1) if params.top_logprobs else None
                for i, (r, t) in enumerate(zip(idx, nxt.tolist())):
                    s = rows[r]
                    toks[s].append(t)
                    lps[s].append(chosen[i])
                    if ent is not None:
                        ents[s].append(ent[i])
                    if top is not None:
                        tops[s].append(dict(zip(top.indices[i].tolist(), top.values[i].tolist())))
                    if grammar is not None and (failed := grammar.error(s) or grammar.advance(s, t)):
                        # the grammar is complete ("stop"), or could not go on: this row fails, not the batch
                        finish[s] = ("stop", t) if failed is True else ("error", failed)
                    elif t in self.eos_ids and not params.ignore_eos:
                        finish[s] = ("stop", t)
                    elif stop and (hit := _find_stop(self.tokenizer.decode(toks[s][-tail:]), stop)):
                        finish[s] = ("stop", hit)
                    elif len(toks[s]) >= budget[s]:
                        finish[s] = ("length", None)
                    if finish[s] is not None:
                        ended.append((r, s))
                    elif stream:
                        stream.step(seqs[s], toks[s])
                    last[r] = t
                    if finish[s] is None and j < width - 1 and t == drafts[r][j]:
                        accepted[r] += 1
                    else:
                        walking[r] = False
            if width > 1:  # fed draft tokens after the first one that was not kept are no part of the sequence
                for r, a in enumerate(accepted):
                    if a < width - 1:
                        mask[r, mask.shape[1] - (width - 1 - a) :] = 0
                    kept[rows[r]] += min(a, real[r])
                pos = pos + torch.tensor(accepted, device=self.device)[:, None]
                self.draft_hits += sum(min(a, n) for a, n in zip(accepted, real))
            base = [(r, s) for r, s in ended if names[seqs[s][0]] is None]  # the cache holds base-model rows only
            self._remember(cache, mask, base, [encoded[seqs[s][0]] + toks[s][:-1] for _, s in base])
            if all(finish[s] is not None for s in rows):
                break
            drafts, real = self._drafts(encoded, seqs, rows, toks, finish, drafted, kept)
            yield
            fed = torch.tensor([[t, *d] for t, d in zip(last, drafts)], device=self.device)
            steps = torch.arange(1, fed.shape[1] + 1, device=self.device)
            mask = torch.cat([mask, mask.new_ones(len(rows), fed.shape[1])], dim=1)
            logits = self._decode_step([names[seqs[s][0]] for s in rows], fed, mask, pos + steps, cache)
            pos = pos + 1
        return [
            self._completion(
                encoded[i],
                toks[s],
                lps[s],
                ents[s] if params.entropy else None,
                tops[s] if params.top_logprobs else None,
                finish[s],
                params,
            )  # type: ignore[arg-type]
            for s, (i, _) in enumerate(seqs)
        ]

    def _drafts(
        self, encoded, seqs, rows: list[int], toks, finish, drafted: list[int], kept: list[int]
    ) -> tuple[list[list[int]], list[int]]:
        """Each row's draft tokens for the next step, padded to one width, and how many are its own (none when
        not speculating, or when a live row has none). A sequence whose drafts are seldom kept (sampling at a
        high temperature, text that repeats nothing) stops drafting: with (kept + 1) / (drafted + 2) under 0.2 a
        draft token costs more than it saves."""
        live = [finish[s] is None for s in rows]
        if not self.speculate or sum(live) * (self.speculate + 1) > self.speculate_tokens:
            return [[] for _ in rows], [0] * len(rows)
        out = [
            _draft(encoded[seqs[s][0]] + toks[s], self.speculate)
            if ok and (kept[s] + 1) / (drafted[s] + 2) >= 0.2
            else []
            for s, ok in zip(rows, live)
        ]
        if any(ok and not d for d, ok in zip(out, live)):
            # A batch takes as many steps as its slowest row: drafts for some rows only would cost a wider step
            # and save none, unless those rows happen to be the last to finish.
            return [[] for _ in rows], [0] * len(rows)
        real = [len(d) for d in out]
        for s, n in zip(rows, real):
            drafted[s] += n
        self.drafted += sum(real)
        width = max(real)
        return [d + [self.pad_id] * (width - len(d)) for d in out], real

    def _grammars(self, constraints: list) -> RowGrammars | None:
        """llguidance matchers for the constrained rows (its tokenizer is built on first use: ~0.5 s)."""
        if all(c is None for c in constraints):
            return None
        if self._compiler is None:
            vocab = self.model.config.get_text_config().vocab_size
            self._compiler = GrammarCompiler(self.tokenizer, vocab, self.eos_ids)
        return self._compiler.rows(constraints)

    def _check_weights(self) -> None:
        """Stored keys/values belong to the weights that made them: drop them once training changed any weight."""
        version = sum(p._version for p in self.model.parameters())
        if self.prefix_cache is not None and version != getattr(self, "_weights_version", version):
            self.prefix_cache.clear()
        self._weights_version = version

    def _remember(self, cache, mask, ended: list[tuple[int, int]], keys: list[list[int]]) -> None:
        """Store finished rows' keys/values (prompt + all tokens but the last, which was never fed back)."""
        if self.prefix_cache is None or not ended or not growing_only(cache):
            return
        for (r, _), key in zip(ended, keys):
            if int(mask[r].sum()) == len(key):  # the row's valid slots are exactly these tokens
                self.prefix_cache.put(key, snapshot_row(cache, r, mask[r]))

    def _completion(self, prompt, toks, lps, ents, tops, finish, params: SamplingParams) -> Completion:
        reason, why = finish
        text = self.tokenizer.decode(toks, skip_special_tokens=True)
        if reason == "stop" and isinstance(why, str):  # cut the text at the stop string
            cut = text.find(why)
            if cut >= 0:
                text = text[: cut + (len(why) if params.include_stop_str_in_output else 0)]
        return Completion(
            text=text,
            token_ids=toks,
            logprobs=lps,
            finish_reason=reason,  # type: ignore[arg-type]
            prompt_tokens=len(prompt),
            entropies=ents,
            top_logprobs=tops,
            stop_reason=why,
        )

    # ---- scoring ------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def score(
        self,
        contexts: list[Prompt],
        continuations: list[str | list[int]],
        entropy: bool = False,
        top_logprobs: int = 0,
    ) -> list[Scored]:
        """Teacher forcing: log p(c_t | context, c_<t) for every token of each continuation.

        Shapes: one forward over left-padded ``[B, L]`` rows keeps logits ``[B, K+1, V]`` for the last K+1
        positions (K = longest continuation), so memory scales with the continuation, not the context.
        """
        if len(contexts) != len(continuations):
            raise ValueError("contexts and continuations must have the same length")
        want = (entropy, top_logprobs)  # what each row's Scored carries besides its logprobs
        ctx = [self.encode(c) for c in contexts]
        cont = self.continuation_ids(continuations)
        results: list[Scored | None] = [None] * len(ctx)
        single = list(range(len(ctx)))
        if self.share_prefix and len(ctx) > 1:
            trunks = group_trunks(ctx, cont)
            shared = [t for t in trunks if len(t.rows) > 1]
            single = [t.rows[0] for t in trunks if len(t.rows) == 1]
            if shared and growing_only(make_cache(self.model.config)):
                for trunk in shared:
                    self._score_trunk(trunk, want, results)
            elif shared:  # sliding-window layers keep only the window in a cache: one masked pass instead
                self._score_packed(shared, want, results)
        self._score_rows(ctx, cont, single, want, results)
        return results  # type: ignore[return-value]

    def _score_rows(self, ctx, cont, rows: list[int], want: tuple[bool, int], results: list) -> None:
        """Score ``rows`` one padded sequence each (context + continuation)."""
        order = sorted(rows, key=lambda i: -len(cont[i]))
        vocab = self.model.config.get_text_config().vocab_size
        start = 0
        while start < len(order):
            k = len(cont[order[start]]) + 1
            per_row = max(1, self.score_budget // (k * vocab * 8))
            batch = order[start : start + min(per_row, self.max_batch_size)]
            start += len(batch)
            ids, mask, pos = self._left_pad([ctx[i] + cont[i] for i in batch])
            self.scored_tokens += int(mask.sum())
            logits = self._forward(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=k).logits
            logp = logits[:, :-1].float().log_softmax(-1)  # kept index j predicts position L-K+j
            for r, i in enumerate(batch):
                c = len(cont[i])
                results[i] = _scored(logp[r, k - 1 - c : k - 1], cont[i], *want)

    def _score_trunk(self, trunk: Trunk, want: tuple[bool, int], results: list) -> None:
        """Rows whose contexts are prefixes of ``trunk.ids``: one causal pass over the trunk keeps its keys/values
        (attention's fast path, no mask), then all rows' continuations go in one batched pass over copies of that
        cache, each row seeing the trunk up to its own context and its own earlier tokens (a mask over the cache).
        The first token of a continuation is read from the trunk's logits at its context's last position."""
        cfg = self.model.config
        n = len(trunk.ids)
        firsts = sorted({ln - 1 for ln, c in zip(trunk.ctx_lens, trunk.conts) if c})
        cache = make_cache(cfg)
        out = self._forward(
            input_ids=torch.tensor([trunk.ids], device=self.device),
            use_cache=True,
            logits_to_keep=torch.tensor(firsts or [n - 1], device=self.device),
            **{self._cache_kw: cache},
        )
        first = out.logits[0].float().log_softmax(-1)  # [len(firsts), V]
        self.scored_tokens += n
        rows = [(i, ln, c) for i, ln, c in zip(trunk.rows, trunk.ctx_lens, trunk.conts) if len(c) > 1]
        rest = None
        if rows:
            width = max(len(c) for _, _, c in rows) - 1  # continuation tokens fed (the last is only predicted)
            ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
            pos = torch.zeros((len(rows), width), dtype=torch.long)
            allowed = torch.zeros((len(rows), 1, width, n + width), dtype=torch.bool)
            for b, (_, ln, c) in enumerate(rows):
                k = len(c) - 1
                ids[b, :k], pos[b, :k] = torch.tensor(c[:-1]), torch.arange(ln, ln + k)
                allowed[b, 0, :k, :ln] = True
                allowed[b, 0, :, n:] = torch.ones(width, width, dtype=torch.bool).tril()
                self.scored_tokens += k
            branches = repeat_rows(cache, len(rows), cfg, width)
            rest = (
                self._forward(
                    input_ids=ids.to(self.device),
                    attention_mask=self._mask(allowed, next(self.model.parameters()).dtype),
                    position_ids=pos.to(self.device),
                    use_cache=True,
                    **{self._cache_kw: branches},
                )
                .logits.float()
                .log_softmax(-1)
            )  # [rows, width, V]
        slot = {i: b for b, (i, _, _) in enumerate(rows)}
        for i, ln, c in zip(trunk.rows, trunk.ctx_lens, trunk.conts):
            if not c:
                results[i] = _scored(first[:0], c, *want)
                continue
            parts = [first[firsts.index(ln - 1)][None]]
            if i in slot:
                parts.append(rest[slot[i], : len(c) - 1])
            results[i] = _scored(torch.cat(parts), c, *want)

    def _score_packed(self, trunks: list[Trunk], want: tuple[bool, int], results: list) -> None:
        """Score rows whose contexts nest: one packed forward per trunk (``agentkit.engines.packed``), the
        ``[B, Q, Q]`` masks and the hidden states of the positions read kept within the scoring budget."""
        cfg = self.model.config.get_text_config()
        sliding = "sliding_attention" in (getattr(cfg, "layer_types", None) or [])
        window = getattr(cfg, "sliding_window", None) if sliding else None
        cap = getattr(cfg, "final_logit_softcapping", None)
        decoder, head = self.model.get_decoder(), self.model.get_output_embeddings()
        dtype = next(self.model.parameters()).dtype
        budget = max(1024, self.score_budget // (4 * cfg.hidden_size))  # tokens per batch (hidden states)
        for batch in budget_batches(trunks, budget, self.max_batch_size):
            ids, pos, full, slide, reads = pack(batch, self.pad_id, window)
            self.scored_tokens += sum(t.length for t in batch)

            mask = (
                {"full_attention": self._mask(full, dtype), "sliding_attention": self._mask(slide, dtype)}
                if sliding
                else self._mask(full, dtype)
            )
            hidden = decoder(input_ids=ids.to(self.device), attention_mask=mask, position_ids=pos.to(self.device))
            flat = hidden.last_hidden_state.reshape(-1, hidden.last_hidden_state.shape[-1])
            # one output projection for every position read in the batch (the head is the model's largest matrix)
            wanted = [j for rows in reads for idx in rows for j in idx]
            logp = head(flat[torch.tensor(wanted, device=self.device, dtype=torch.long)]).float()
            if cap:
                logp = torch.tanh(logp / cap) * cap
            logp = logp.log_softmax(-1)
            at = 0
            for trunk, rows in zip(batch, reads):
                for i, cont, idx in zip(trunk.rows, trunk.conts, rows):
                    results[i] = _scored(logp[at : at + len(idx)], cont, *want)
                    at += len(idx)

    def _mask(self, allowed: torch.Tensor, dtype):
        """A boolean mask as the attention implementation takes it: as is for SDPA, additive for eager."""
        if self.model.config._attn_implementation in ("sdpa", attention.NAME):
            return allowed.to(self.device)
        return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min).to(self.device)


class GenerationJob:
    """One ``HFEngine.generate`` call run a step at a time (``HFEngine.start``); not thread-safe: one thread steps
    it, any thread may ``cancel``."""

    def __init__(self, steps, cancelled: set[int]):
        self._steps, self._cancelled = steps, cancelled
        self._done, self._result = False, None

    def step(self) -> bool:
        """Run the next forward pass; True once the job is done (``result()`` is ready)."""
        if not self._done:
            try:
                next(self._steps)
            except StopIteration as stop:
                self._done, self._result = True, stop.value
        return self._done

    def cancel(self, prompts) -> None:
        """End every sample of these prompt indices at the next step (``finish_reason="abort"``)."""
        self._cancelled.update(prompts)

    def result(self) -> list[list[Completion]]:
        if not self._done:
            raise RuntimeError("the generation job is not done")
        return self._result  # type: ignore[return-value]


def _scored(logp: torch.Tensor, cont: list[int], entropy: bool, top: int = 0) -> Scored:
    """A continuation's ``Scored`` from the log-probabilities ``[len(cont), V]`` that predict its tokens (and
    the ``top`` most likely tokens at each position, best first)."""
    tok = torch.tensor(cont, device=logp.device, dtype=torch.long)
    lp = logp.gather(-1, tok[:, None])[:, 0].tolist() if cont else []
    ent = (-(logp.exp() * logp).sum(-1)).tolist() if entropy else None
    tops = None
    if top:
        vals, ids = logp.topk(min(top, logp.shape[-1]), dim=-1)
        tops = [dict(zip(i, v)) for i, v in zip(ids.tolist(), vals.tolist())]
    return Scored(token_ids=cont, logprobs=lp, entropies=ent, top_logprobs=tops)


def _length_groups(lengths: list[int], overhead: int = 48) -> list[list[int]]:
    """Split rows into groups of similar length minimising padded tokens + ``overhead`` per forward call.

    Dynamic programming over the rows sorted by length: a group costs ``rows × its longest length + overhead``
    (``overhead`` ≈ the token-equivalent cost of one extra forward call).

    >>> _length_groups([40, 41, 17, 18, 28, 27])  # 2·41 + 48 + 4·28 + 48 = 290 < 6·41 + 48
    [[1, 0], [4, 5, 3, 2]]
    """
    order = sorted(range(len(lengths)), key=lambda r: -lengths[r])
    n = len(order)
    best = [0.0] + [float("inf")] * n  # best[i]: cost of grouping the i longest rows
    cut = [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(i):  # group = order[j:i], its longest is order[j]
            cost = best[j] + (i - j) * lengths[order[j]] + overhead
            if cost < best[i]:
                best[i], cut[i] = cost, j
    groups, i = [], n
    while i > 0:
        groups.append(order[cut[i] : i])
        i = cut[i]
    return groups[::-1]


def _draft(ctx: list[int], k: int, max_n: int = 3) -> list[int]:
    """Prompt lookup (n-gram drafting): the ``k`` tokens that followed the latest earlier occurrence of the last
    ``n`` tokens of ``ctx``, for the largest ``n <= max_n`` that occurs. Agent turns copy much from their context
    (numbers from the question, names from a search result, the tags of the examples).

    >>> _draft([5, 6, 7, 8, 9, 6, 7], 2)
    [8, 9]
    """
    for n in range(min(max_n, len(ctx) - 1), 0, -1):
        pat = ctx[-n:]
        for start in range(len(ctx) - n - 1, -1, -1):
            if ctx[start : start + n] == pat:
                return ctx[start + n : start + n + k]
    return []


def _common_prefix_len(seqs: list[list[int]]) -> int:
    first, n = seqs[0], min(len(s) for s in seqs)
    for k in range(n):
        if any(s[k] != first[k] for s in seqs):
            return k
    return n


def _find_stop(text: str, stop: list[str]) -> str | None:
    return next((s for s in stop if s in text), None)


def _generators(seeds: list[int | None], sample_idx: list[int], device) -> list[torch.Generator] | None:
    """One generator per row seeded by (its prompt's seed, sample index): a prompt's samples do not depend on its
    batch. An unseeded row among seeded ones (requests merged by the server) gets a random seed."""
    if all(s is None for s in seeds):
        return None
    gens = []
    for seed, j in zip(seeds, sample_idx):
        g = torch.Generator(device=device)
        if seed is None:
            g.seed()
        else:
            g.manual_seed((seed * 1_000_003 + j) % (2**63 - 1))
        gens.append(g)
    return gens


__all__ = ["GenerationJob", "HFEngine"]
