"""The transformers GPT-2 the paper's toy runs train, with the three switches its analysis needs [code:
``src/model.py``, ``src/patched_gpt2.py``]:

- **detach** (layer ℓ, position i): the residual r_i^ℓ (ℓ = 0 the embeddings, ℓ ≥ 1 the output of block ℓ) enters
  the later computation as stop-grad(r_i^ℓ), so no gradient reaches the parameters through it. A forward hook on the
  block does what the official patch does inside it.
- **myopic**: attention computes its scores and outputs with stop-grad keys and values off the diagonal,

  .. math::

      a_{ij} = \\operatorname{softmax}_j\\big(q_i \\cdot \\bar k_j / \\sqrt{d}\\big), \\quad
      o_i = \\textstyle\\sum_j a_{ij} \\bar v_j + a_{ii}(v_i - \\bar v_i), \\qquad
      \\bar k_j = \\operatorname{sg}(k_j) \\ (j \\ne i), \\ \\bar k_i = k_i ,

  so the values are the same and position j's parameters learn only from its own loss: no gradient from the future.
  Registered as the attention implementation ``"myopic"`` (transformers' ``AttentionInterface``).
- **untied** at m: positions < m run one GPT-2 and positions ≥ m a second, separately initialised one that attends
  to the first's keys and values through the KV cache (the official ``HFSplitDecoderModel``).

``LM.forward`` returns the logits ``[b, T, V]`` and the residual stream ``[L+1, b, T, d]``: the embeddings and each
block's output, recorded by the same hooks (the official probes read transformers' ``hidden_states``, whose last
entry is after the final layer norm; here every entry is the raw residual).

>>> lm = LM(vocab=5, length=8, d=16, layers=2, heads=2, myopic=True, split=4)
>>> logits, hidden = lm(torch.randint(0, 5, (3, 8)))
>>> tuple(logits.shape), tuple(hidden.shape)
((3, 8, 5), (3, 3, 8, 16))
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from transformers import AttentionInterface, GPT2Config, GPT2LMHeadModel


def myopic_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Causal attention whose keys and values carry gradient only on the diagonal (see the module docstring).
    ``query [b, h, q, e]``, ``key``/``value [b, h, k, e]`` (k ≥ q: the queries are the last q positions; no padding,
    so transformers passes no mask for a custom implementation and the causal mask is built here)."""
    q_len, k_len = query.shape[-2], key.shape[-2]
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    rows = torch.arange(k_len - q_len, k_len, device=query.device)[:, None]
    cols = torch.arange(k_len, device=query.device)[None]
    diag = rows == cols  # [q, k]
    k_bar, v_bar = key.detach(), value.detach()
    scores = torch.where(diag, query @ key.transpose(-1, -2), query @ k_bar.transpose(-1, -2)) * scaling
    scores = scores.masked_fill(cols > rows, torch.finfo(scores.dtype).min)
    attn = scores.softmax(-1).to(value.dtype)
    out = attn @ v_bar + (attn * diag) @ (value - v_bar)
    return out.transpose(1, 2), attn


AttentionInterface.register("myopic", myopic_attention)


class LM(nn.Module):
    """A GPT-2 language model (no dropout, feed-forward 4d) with the switches above.

    Args:
        vocab: token count.
        length: longest sequence (positions).
        d, layers, heads: width, blocks, attention heads.
        myopic: stop-grad through cross-position keys and values.
        split: untie at this position (None: one set of weights).
    """

    def __init__(
        self,
        vocab: int,
        length: int,
        d: int = 128,
        layers: int = 2,
        heads: int = 4,
        myopic: bool = False,
        split: int | None = None,
    ):
        super().__init__()
        cfg = GPT2Config(
            vocab_size=vocab,
            n_positions=length,
            n_embd=d,
            n_layer=layers,
            n_head=heads,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=None,
            eos_token_id=None,
        )
        cfg._attn_implementation = "myopic" if myopic else "eager"
        self.split = split
        self.parts = nn.ModuleList([GPT2LMHeadModel(cfg)] + ([GPT2LMHeadModel(cfg)] if split is not None else []))
        self._detach: tuple[int, int] | None = None
        self._record: list[list[torch.Tensor]] = []
        for part, offset in zip(self.parts, (0, split or 0)):
            blocks = [part.transformer.drop] + list(part.transformer.h)  # ℓ = 0: the embeddings (after dropout)
            for layer, block in enumerate(blocks):
                block.register_forward_hook(self._hook(layer, offset))

    def _hook(self, layer: int, offset: int):
        def hook(module, args, out):
            pos = None if self._detach is None or self._detach[0] != layer else self._detach[1] - offset
            if pos is not None and 0 <= pos < out.shape[1]:
                keep = torch.zeros(out.shape[1], 1, dtype=torch.bool, device=out.device)
                keep[pos] = True
                out = torch.where(keep, out.detach(), out)
            self._record[layer].append(out)
            return out

        return hook

    @contextlib.contextmanager
    def attention(self, implementation: str):
        """Within the block, every part attends with ``implementation`` ("eager" turns myopia off)."""
        cfgs = [p.config for p in self.parts]
        before = [c._attn_implementation for c in cfgs]
        for c in cfgs:
            c._attn_implementation = implementation
        try:
            yield
        finally:
            for c, b in zip(cfgs, before):
                c._attn_implementation = b

    @contextlib.contextmanager
    def detached(self, layer: int, position: int):
        """Within the block, r_position^layer enters later computation as stop-grad."""
        self._detach = (layer, position)
        try:
            yield
        finally:
            self._detach = None

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self._record = [[] for _ in range(len(self.parts[0].transformer.h) + 1)]
        if self.split is None or tokens.shape[1] <= self.split:
            logits = self.parts[0](tokens, use_cache=False).logits
        else:
            first = self.parts[0](tokens[:, : self.split], use_cache=True)
            second = self.parts[1](
                tokens[:, self.split :],
                past_key_values=first.past_key_values,
                use_cache=True,
                position_ids=torch.arange(self.split, tokens.shape[1], device=tokens.device)[None],
            )
            logits = torch.cat([first.logits, second.logits], 1)
        hidden = torch.stack([torch.cat(r, 1) for r in self._record])
        self._record = []
        return logits, hidden

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        """Per-position next-token cross-entropy ``[T−1]`` (mean over the batch)."""
        logits = self(tokens)[0][:, :-1]
        return nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none").mean(0)
