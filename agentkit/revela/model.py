"""Revela's training objective: a retriever and a causal LM, trained together by next-token prediction.

For a batch of B chunks (Cai et al., 2025, §3):

1. the retriever embeds each chunk as a passage (``passage: `` + chunk) and, in the paper's text setting, the
   first half of each chunk as a query (``query: `` + first half): e_q, e_p [B, D];
2. Sim = row-softmax(cos(e_q, e_pᵀ) / τ) with the diagonal masked  ([B, B], ``attention.similarity``);
3. the LM runs once plainly, recording each layer's K/V (no graph unless ``kv_grad``), then again with the
   in-batch term h_i += Σ_{j≠i} Sim_ij softmax(Q_i K_jᵀ/√d) V_j in every layer (``attention.InBatch``);
4. loss = CE(next token | own prefix + in-batch context) [+ the plain CE when ``dual_loss``].

The plain pass needs the LM head only for the plain CE (``dual_loss``, or ``log_plain`` to log it), and the K/V of
only the chunks that some row of Sim weights: without the plain CE it runs on those chunks alone, without the head.
At the paper's τ = 1e-4 Sim is nearly one-hot and a few "hub" chunks take most rows (6 of 16 in
``agentkit bench revela``), so this pass costs a fraction of a forward. The loss is the same either way (tested).

The CE is computed a few hundred tokens at a time from the decoder's last hidden state (``causal_lm_loss``):
Gemma 3's 262k-entry vocabulary makes a batch's logits [16, 96, 262144] 1.6 GB in float32, and HF's loss keeps
two more copies of them for the backward.

The retriever gets gradient only through Sim, the LM through both passes' losses.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from agentkit.models.retriever import Retriever
from agentkit.revela.attention import InBatch, enable, similarity


@dataclass
class LossOutput:
    loss: torch.Tensor
    sim: torch.Tensor  # [B, B]
    loss_inbatch: float
    loss_plain: float | None  # None when not computed (``log_plain`` and ``dual_loss`` off)


def load_lm(name: str, lora_r: int = 0, lora_alpha: int | None = None, seed: int = 0) -> nn.Module:
    """A causal LM with the ``revela`` attention enabled (SDPA until a forward passes ``revela=``), LoRA optional."""
    from transformers import AutoModelForCausalLM

    from agentkit.models.catalog import resolve

    lm = AutoModelForCausalLM.from_pretrained(str(resolve(name)), dtype=torch.float32, attn_implementation="sdpa")
    enable(lm)
    if lora_r:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(seed)
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        cfg = LoraConfig(r=lora_r, lora_alpha=lora_alpha or 2 * lora_r, lora_dropout=0.0, target_modules=targets)
        lm = get_peft_model(lm, cfg)
    return lm


def _base(lm: nn.Module) -> nn.Module:
    return lm.get_base_model() if hasattr(lm, "get_base_model") else lm


def causal_lm_loss(lm: nn.Module, ids: torch.Tensor, mask: torch.Tensor, chunk: int = 512, **kw) -> torch.Tensor:
    """Mean next-token CE of ``lm`` on ids [B, L] (positions with mask 0 ignored), equal to HF's ``labels=`` loss.

    Logits [chunk, V] exist for one chunk of tokens at a time, and are recomputed in the backward rather than kept
    (``torch.utils.checkpoint``), so peak memory no longer scales with B·L·V. ``kw`` goes to the decoder
    (``revela=``).
    """
    from torch.utils.checkpoint import checkpoint

    base = _base(lm)
    hidden = base.get_decoder()(input_ids=ids, attention_mask=mask, **kw).last_hidden_state  # [B, L, H]
    keep = mask[:, 1:].bool()
    h, target = hidden[:, :-1][keep], ids[:, 1:][keep]  # [N, H], [N]
    head, cap = base.get_output_embeddings(), getattr(base.config, "final_logit_softcapping", None)

    def ce_sum(h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = head(h)
        if logits.dtype in (torch.float16, torch.bfloat16):  # CE in at least float32 (a float64 model keeps its own)
            logits = logits.float()
        if cap:  # Gemma's soft-capping, as its forward applies it
            logits = torch.tanh(logits / cap) * cap
        return nn.functional.cross_entropy(logits, target, reduction="sum")

    grad = torch.is_grad_enabled()
    total = sum(
        checkpoint(ce_sum, h[i : i + chunk], target[i : i + chunk], use_reentrant=False)
        if grad
        else ce_sum(h[i : i + chunk], target[i : i + chunk])
        for i in range(0, len(target), chunk)
    )
    return total / max(len(target), 1)


class RevelaModel(nn.Module):
    """The retriever and the LM, trained together by the in-batch LM loss (the module's steps 1–4).

    Args:
        retriever: the dense retriever being trained (``agentkit.models.retriever.Retriever``).
        lm: the causal LM whose loss trains it (``load_lm``; LoRA or frozen).
        tau: Sim's temperature τ (the paper's 1e-4).
        v_norm: divide each pair's in-batch output by the attention-weighted mean ‖V_j‖ (the official default).
        dual_loss: add the plain CE (the LM's own next-token loss) to the in-batch one.
        kv_grad: keep the plain pass's K/V in the graph (the LM learns through them too).
        log_plain: compute the plain CE to log it, even when it is not in the loss.
    """

    def __init__(
        self,
        retriever: Retriever,
        lm: nn.Module,
        tau: float = 1e-4,
        v_norm: bool = False,
        dual_loss: bool = False,
        kv_grad: bool = False,
        log_plain: bool = True,
    ):
        super().__init__()
        self.retriever, self.lm = retriever, lm
        self.tau, self.v_norm, self.dual_loss, self.kv_grad = tau, v_norm, dual_loss, kv_grad
        self.log_plain = log_plain

    def similarity(self, batch: dict) -> torch.Tensor:
        """Sim [B, B] from the batch's retriever inputs (``ret_query`` falls back to ``ret_passage``)."""
        passages = self.retriever(batch["ret_passage"])
        queries = self.retriever(batch["ret_query"]) if batch.get("ret_query") is not None else passages
        return similarity(queries, passages, self.tau)

    def lm_loss(self, batch: dict, sim: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(in-batch loss, plain loss or None) of the LM on ``lm_input_ids`` [B, L] / ``lm_attention_mask`` [B, L].
        The plain loss is computed when ``dual_loss`` or ``log_plain``; otherwise pass 1 records only the chunks
        some row of ``sim`` weights (columns with a non-zero entry), trimmed of padding."""
        ids, mask = batch["lm_input_ids"], batch["lm_attention_mask"]
        ctx = InBatch("record", keep_grad=self.kv_grad)
        plain, record_grad = None, torch.is_grad_enabled() and (self.dual_loss or self.kv_grad)
        if self.dual_loss or self.log_plain:
            with torch.set_grad_enabled(record_grad):
                plain = causal_lm_loss(self.lm, ids, mask, revela=ctx)
            ctx.sim, ctx.key_mask = sim, mask.bool()
        else:
            cols = sim.detach().ne(0).any(dim=0).nonzero().squeeze(1)  # the chunks some row attends to
            cols = cols if cols.numel() else cols.new_zeros(1)  # Sim ≡ 0: one chunk recorded, no pair attended
            width = max(int(mask[cols].sum(dim=1).max()), 1)  # right padding: trimmed
            sub_ids, sub_mask = ids[cols, :width], mask[cols, :width]
            with torch.set_grad_enabled(record_grad):
                _base(self.lm).get_decoder()(input_ids=sub_ids, attention_mask=sub_mask, revela=ctx)
            ctx.sim, ctx.key_mask = sim[:, cols], sub_mask.bool()
        receive = mask.bool() if batch.get("inbatch_mask") is None else mask.bool() & batch["inbatch_mask"]
        ctx.mode, ctx.v_norm, ctx.query_mask = "attend", self.v_norm, receive
        inbatch = causal_lm_loss(self.lm, ids, mask, revela=ctx)
        return inbatch, plain

    def forward(self, batch: dict) -> LossOutput:
        sim = self.similarity(batch)
        inbatch, plain = self.lm_loss(batch, sim)
        loss = inbatch + plain if self.dual_loss else inbatch
        return LossOutput(loss, sim, float(inbatch.detach()), None if plain is None else float(plain.detach()))
