"""A compact decode step for Llama-family models (Llama, Qwen2, Mistral without a sliding window): transformers'
arithmetic for one step of decoding, in far fewer tensor operations.

A decode step feeds each row one token (or a few: prompt-lookup drafts). At batch 1 on a CPU its matmuls are narrow
and much of the time goes around them: transformers' forward builds a 4-D mask, the rotary table and each cache
update through several Python layers per decoder layer. This step builds the mask and the rotary table once,
writes keys/values straight into the engine's growing cache (``agentkit.engines.kv``), ropes queries and keys in
one operation, and otherwise runs each layer as transformers does:

.. math::

    h &= x + W_o\\,\\mathrm{attn}\\big(\\mathrm{rope}(W_q n_1(x)),\\ \\mathrm{rope}(W_k n_1(x)),\\ W_v n_1(x)\\big) \\\\
    y &= h + W_d\\,\\big(\\mathrm{silu}(W_g n_2(h)) \\odot W_u n_2(h)\\big)

with :math:`n_1, n_2` the layer's RMS norms, then the final norm and the output head. Two things make a wide step
(many rows) faster than that forward pass as well: every projection, the output head included, is computed as
:math:`W h^\\top` rather than :math:`h W^\\top` (the same numbers: MKL runs a few-row product much faster this
way round), and attention takes each key/value head's group of query heads as the rows of one matmul
(``grouped_attention``). The sums then run in another order, so in fp32 its logprobs are transformers' within a
tested 5e-4 nats, not to the bit. Shapes: ``input_ids`` ``[R, J]`` (R rows, J tokens fed each),
``attention_mask`` ``[R, L]`` over the whole cache including the fed tokens (0: padding, or a rejected draft),
``position_ids`` ``[R, J]``; returns logits ``[R, J, V]``.

**bf16 weights** (``low="bfloat16"``): a narrow step (rows × tokens ≤ ``max_rows``) is bound by the weight bytes
it reads, so it reads the layers' linear weights from a bf16 copy, :math:`W_q, W_k, W_v` and :math:`W_g, W_u`
concatenated (four matmuls per layer instead of seven): oneDNN's bf16 matmul, fp32 accumulation, outputs rounded to
bf16 and widened to fp32, except :math:`\\mathrm{silu}(W_g\\cdot) \\odot W_u\\cdot`, which stays bf16 as
:math:`W_d`'s input would be rounded to anyway. The residual stream, the norms, the rotary embedding, attention over
the fp32 cache and the output head stay fp32 (the head's logits are what sampling, logprobs and entropies read).
Wider steps read the fp32 weights. The copy follows the model: each step checks the weights' versions and rebuilds
a layer's copy after an in-place update (a trainer's optimiser step) or a new tensor (weights reloaded).

The step runs only while every projection is still the plain ``torch.nn.Linear`` it was built on, with whole
weights (``CompactDecoder.current``): a LoRA layer injected later, a quantised one, or DeepSpeed ZeRO-3 partitions
send HFEngine back to the model's own forward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from agentkit.models.sharding import is_partitioned

ARCHITECTURES = ("llama", "qwen2", "mistral")
LOW_DTYPES = ("bfloat16",)
_HEAD_SLICE = 2048  # vocabulary rows per slice of the output head: its [2048, R] output stays in L2
_PROJECTIONS = (("self_attn", "q_proj"), ("self_attn", "k_proj"), ("self_attn", "v_proj"), ("self_attn", "o_proj"))
_PROJECTIONS += (("mlp", "gate_proj"), ("mlp", "up_proj"), ("mlp", "down_proj"))


def unsupported(model) -> str | None:
    """Why ``model`` cannot take the compact step (None: it can).

    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> unsupported(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2)))
    "model type 'gpt2' (the compact decode step covers llama, qwen2, mistral)"
    """
    if not isinstance(model, PreTrainedModel):
        return f"a {type(model).__name__} (a wrapped model: the compact step reads a transformers model's layers)"
    cfg = model.config
    kind = getattr(cfg, "model_type", None)
    if kind not in ARCHITECTURES or not type(model).__name__.endswith("ForCausalLM"):
        return f"model type {kind!r} (the compact decode step covers {', '.join(ARCHITECTURES)})"
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", kind == "mistral"):
        return "a sliding attention window"
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "mlp_bias", False):
        return "an MLP other than SwiGLU without biases"
    if getattr(cfg, "pretraining_tp", 1) != 1:
        return "pretraining_tp > 1"
    if is_partitioned(model):
        return "DeepSpeed ZeRO-3 partitioned weights"
    if not hasattr(model.model, "rotary_emb") or not all(_plain(layer) for layer in model.model.layers):
        return "layers other than plain linear projections (LoRA, quantised)"
    return None


def _plain(layer) -> bool:
    return all(type(getattr(getattr(layer, a), p)) is torch.nn.Linear for a, p in _PROJECTIONS)


def _bf16(weights: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([w.detach() for w in weights]).to(torch.bfloat16)


def _low_mm(x: torch.Tensor, w: torch.Tensor, widen: bool = True) -> torch.Tensor:
    """``x Wᵀ`` with bf16 ``w``: x ``[N, in]`` (fp32 or bf16) → ``[N, out]`` fp32 (``widen``) or bf16."""
    y = F.linear(x.to(torch.bfloat16), w)
    return y.float() if widen else y


class _Layer:
    """One decoder layer: its fp32 modules, and their bf16 copy when ``low`` is set."""

    def __init__(self, layer, low: str | None):
        a, m = layer.self_attn, layer.mlp
        self.parents = (a, a, a, a, m, m, m)
        self.n1, self.n2 = layer.input_layernorm, layer.post_attention_layernorm
        self.q, self.k, self.v, self.o = a.q_proj, a.k_proj, a.v_proj, a.o_proj
        self.gate, self.up, self.down = m.gate_proj, m.up_proj, m.down_proj
        self.mods = (self.q, self.k, self.v, self.o, self.gate, self.up, self.down)
        self.low, self.key, self.packed = low, None, ()

    def current(self) -> bool:
        return all(getattr(p, n) is m for p, (_, n), m in zip(self.parents, _PROJECTIONS, self.mods))

    def compact(self) -> tuple:
        """The bf16 copy ``(W_qkv, b_qkv, W_o, W_gate_up, W_down)``, built on first use and again after the
        weights changed (in place: a new version; or replaced: a new tensor)."""
        weights = [m.weight for m in self.mods]
        key = [(w.data_ptr(), w._version) for w in weights]
        if key != self.key:
            q, k, v = self.q, self.k, self.v
            bias = None if q.bias is None else torch.cat([q.bias, k.bias, v.bias]).detach()
            self.packed = (_bf16(weights[:3]), bias, _bf16(weights[3:4]), _bf16(weights[4:6]), _bf16(weights[6:]))
            self.key = key
        return self.packed

    # Each projection returns its output transposed, [out, N] (possibly a view): in fp32 it is computed as W hᵀ,
    # which MKL runs faster than h Wᵀ for the few rows of a decode step from 2 rows on (`agentkit bench engine`
    # times the layers both ways: projection_ms), and the MLP then needs no transpose at all.

    def qkv(self, x: torch.Tensor, packed: tuple) -> torch.Tensor:
        """``[N, in]`` → queries, keys and values ``[q + k + v, N]``."""
        if packed:
            y = _low_mm(x, packed[0])
            return (y if packed[1] is None else y + packed[1]).t()
        xt = x.t()
        return torch.cat([_column(m, xt) for m in (self.q, self.k, self.v)])

    def out(self, x: torch.Tensor, packed: tuple) -> torch.Tensor:
        """``[N, heads × D]`` → ``[hidden, N]``."""
        if packed:
            y = _low_mm(x, packed[2])
            return (y if self.o.bias is None else y + self.o.bias).t()
        return _column(self.o, x.t())

    def mlp(self, x: torch.Tensor, packed: tuple) -> torch.Tensor:
        """``[N, hidden]`` → ``[hidden, N]``."""
        if packed:
            g, u = _low_mm(x, packed[3], widen=False).chunk(2, -1)
            return _low_mm(F.silu(g).mul_(u), packed[4]).t()
        xt = x.t()
        return torch.mm(self.down.weight, F.silu(torch.mm(self.gate.weight, xt)).mul_(torch.mm(self.up.weight, xt)))


def _column(linear: torch.nn.Linear, xt: torch.Tensor) -> torch.Tensor:
    """``linear`` on columns: ``W xᵀ (+ b)``, ``xt`` ``[in, N]`` → ``[out, N]``."""
    y = torch.mm(linear.weight, xt)
    return y if linear.bias is None else y.add_(linear.bias[:, None])


class CompactDecoder:
    """The decode step of a Llama-family ``model`` (see the module's docstring); ``low``: ``"bfloat16"`` for the
    layers' weights in steps of at most ``max_rows`` rows × tokens (None: fp32 throughout).

    >>> import torch
    >>> from agentkit.engines.kv import make_cache
    >>> from agentkit.models import load_model
    >>> model, _ = load_model("tiny-random")
    >>> ids = torch.tensor([[5, 6, 7, 8]])
    >>> mask, pos = torch.ones_like(ids), torch.arange(4)[None]
    >>> a, b = make_cache(model.config), make_cache(model.config)
    >>> with torch.no_grad():
    ...     _ = model(input_ids=ids[:, :3], attention_mask=mask[:, :3], position_ids=pos[:, :3], past_key_values=a)
    ...     _ = model(input_ids=ids[:, :3], attention_mask=mask[:, :3], position_ids=pos[:, :3], past_key_values=b)
    ...     ref = model(input_ids=ids[:, 3:], attention_mask=mask, position_ids=pos[:, 3:], past_key_values=a).logits
    >>> torch.allclose(CompactDecoder(model)(ids[:, 3:], mask, pos[:, 3:], b), ref, atol=1e-5)
    True
    """

    def __init__(self, model, low: str | None = None, max_rows: int = 1):
        if (why := unsupported(model)) is not None:
            raise ValueError(f"no compact decode step for this model: {why}")
        if low is not None and low not in LOW_DTYPES:
            raise ValueError(f"unknown decode dtype {low!r} (one of float32, {', '.join(LOW_DTYPES)})")
        cfg = model.config
        self.model, self.low, self.max_rows = model, low, max_rows
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.layers = [_Layer(layer, low) for layer in model.model.layers[: cfg.num_hidden_layers]]

    def current(self) -> bool:
        """Whether every projection is still the module the step was built on, with whole weights (not ZeRO-3
        partitions, which only the model's own forward pass gathers)."""
        return not hasattr(self.layers[0].q.weight, "ds_id") and all(layer.current() for layer in self.layers)

    @torch.no_grad()
    def __call__(self, input_ids, attention_mask, position_ids, cache) -> torch.Tensor:
        body = self.model.model
        rows, fed = input_ids.shape
        low = self.low is not None and rows * fed <= self.max_rows
        x = body.embed_tokens(input_ids).reshape(rows * fed, -1)
        cos, sin = body.rotary_emb(x, position_ids)  # [R, J, D], once for every layer
        cos, sin = cos[:, None], sin[:, None]
        mask = _step_mask(attention_mask, fed)
        bias = None if mask is None else torch.zeros_like(mask, dtype=x.dtype).masked_fill_(~mask, float("-inf"))
        heads, qk, d = self.heads, self.heads + self.kv_heads, self.head_dim
        for i, layer in enumerate(self.layers):
            packed = layer.compact() if low else ()
            n = layer.n1
            h = F.rms_norm(x, n.weight.shape, n.weight, n.variance_epsilon)
            # [(q + k + v) heads × D, R × J] → [R, heads, J, D] (a view)
            qkv = layer.qkv(h, packed).view(qk + self.kv_heads, d, rows, fed).permute(2, 0, 3, 1)
            roped = _rope(qkv[:, :qk], cos, sin)  # queries and keys in one go
            keys, values = cache.layers[i].update(roped[:, heads:], qkv[:, qk:])
            att = grouped_attention(roped[:, :heads], keys, values, bias)
            x.add_(layer.out(att.transpose(1, 2).reshape(rows * fed, -1), packed).t())
            n = layer.n2
            x.add_(layer.mlp(F.rms_norm(x, n.weight.shape, n.weight, n.variance_epsilon), packed).t())
        n = body.norm
        x = F.rms_norm(x, n.weight.shape, n.weight, n.variance_epsilon)
        head = self.model.get_output_embeddings()
        # (W xᵀ)ᵀ, not x Wᵀ, as for the layers: faster for the vocabulary-wide product too, in slices of the
        # vocabulary so that each slice is copied back to rows while it is still in cache (one row: one product)
        xt, logits = x.t(), x.new_empty(rows * fed, head.weight.shape[0])
        width = _HEAD_SLICE if rows * fed > 1 else logits.shape[1]
        for start in range(0, logits.shape[1], width):
            logits[:, start : start + width] = torch.mm(head.weight[start : start + width], xt).t()
        return (logits if head.bias is None else logits + head.bias).view(rows, fed, -1)


def grouped_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor | None):
    """Attention of the fed tokens' queries over the cache, each key/value head shared by a group of query heads:

    .. math::

        \\mathrm{attn}(q)_{h} = \\mathrm{softmax}\\big(q_h K_{g(h)}^\\top / \\sqrt{D} + b\\big)\\, V_{g(h)},
        \\qquad g(h) = \\lfloor h / (H / G) \\rfloor

    as two batched matmuls per layer with each group's query heads (× fed tokens) as the rows of one product, so
    no key or value is repeated or copied. On a CPU this beats SDPA's kernel, which runs a small product per
    (row, head) pair: a decode step's queries are one token (or a few drafts) each. Shapes: ``q`` ``[R, H, J, D]``,
    ``keys``/``values`` ``[R, G, L, D]``, ``bias`` ``[R, 1, J, L]`` additive (``-inf``: not visible) or None;
    returns ``[R, H, J, D]``. Float sums run in another order than SDPA's: equal to it within ~1e-6 (tested).

    >>> import torch
    >>> q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    >>> torch.allclose(grouped_attention(q, k, v, None), ref, atol=1e-6)
    True
    """
    rows, heads, fed, d = q.shape
    groups, width = keys.shape[1], keys.shape[2]
    scores = torch.matmul(q.reshape(rows, groups, heads // groups * fed, d), keys.transpose(-1, -2)).mul_(d**-0.5)
    if bias is not None:  # [R, G, H/G, J, L] + [R, 1, 1, J, L]
        scores = scores.view(rows, groups, heads // groups, fed, width).add_(bias[:, :, None]).view_as(scores)
    return torch.matmul(scores.softmax(-1), values).view(rows, heads, fed, d)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' ``apply_rotary_pos_emb`` on one tensor ``[R, H, J, D]``: ``x·cos + rotate_half(x)·sin``."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1).mul_(sin).add_(x * cos)


def _step_mask(attention_mask: torch.Tensor, fed: int) -> torch.Tensor | None:
    """The boolean attention mask ``[R, 1, J, L]`` of a step feeding ``J`` tokens per row: slot ``l`` is visible to
    the ``j``-th fed token iff the row's mask keeps it and it is not a later fed token. None when every slot is
    visible to every fed token (one token fed, no padding).

    >>> import torch
    >>> _step_mask(torch.tensor([[0, 1, 1, 1]]), 2)[0, 0].int().tolist()
    [[0, 1, 1, 0], [0, 1, 1, 1]]
    >>> _step_mask(torch.tensor([[1, 1]]), 1) is None
    True
    """
    keep = attention_mask.bool()
    if fed == 1 and bool(keep.all()):
        return None
    width = keep.shape[1]
    causal = (
        torch.arange(width, device=keep.device)[None] <= torch.arange(width - fed, width, device=keep.device)[:, None]
    )
    return keep[:, None, None, :] & causal[None, None]
