"""``agentkit bench revela``: one Revela training step on a batch of 16 chunks against a plain LM step and against a
naive per-pair implementation, in the same process.

Workload: 16 chunks of the stdlib-docstring benchmark (``pydoc``; every machine has it), ≤ ``tokens`` LM tokens
each; SmolLM2-135M as retriever (EOS pooling) and as LM, LoRA r=16 on both (the recipe's ``paper`` preset).
Timed over ``repeats`` rounds after a warm-up round, each round running every variant once, in turn; seconds are
medians over rounds, ratios the median of each round's ratio (robust to a shared machine's drift). Forward +
backward:

- ``plain``: the LM's ordinary loss on the batch, computed as the Revela passes compute theirs (``causal_lm_loss``:
  the CE a chunk of tokens at a time), so the ratios isolate the in-batch term; ``plain_hf`` is the same step with
  transformers' own ``labels=`` loss, what an ordinary fine-tuning step costs;
- ``revela_lm``: the LM side of a Revela step given Sim, as the paper trains it (no plain loss): the recording pass
  (no graph, only the chunks Sim weights, no LM head) and the pass with the in-batch term
  (``agentkit.revela.attention``), with the retriever's real Sim at τ = 1e-4 (pairs of weight 0 skipped) and with
  a dense Sim (every pair and every chunk, the worst case); target ≤ 1.5× ``plain``; ``revela_lm_logged``: the
  same with the plain loss computed and logged (``log_plain``, the recipe's default), so the recording pass runs
  the whole batch and the head;
- ``revela_lm_kv_grad``: the LM side with the recording pass's keys/values kept in the graph (``kv_grad``, the
  official code's): the recording pass keeps its activations and is back-propagated too;
- ``revela_full``: the whole step, retriever included (two retriever passes: query halves and passages);
- ``naive``: one LM forward per ordered pair (i, j ≠ i), chunk i attending to chunk j's cached K/V, the losses
  weighted by Sim_ij: the B(B−1) forwards a per-pair implementation needs.

Memory, beside the times: ``saved_for_backward_mib``, what autograd keeps for the backward of each variant's
forward (``saved_mib``: every tensor saved for backward, each storage once, the weights not counted), which is the
activation memory a step adds to the model's.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import torch

from agentkit.argtypes import POS_INT, number
from agentkit.command import add_out_option
from agentkit.eval.bench import write_json


def _timed(fns: dict[str, Callable[[], None]], repeats: int) -> dict[str, list[float]]:
    """Seconds of each function in each of ``repeats`` rounds, after one warm-up round. A round runs every function
    once, in turn, so a shared machine's drifting speed weighs on all of them alike (timed one after another, the
    plain step once measured 5.5 s in one run and 12.9 s in the next); ratios are taken within a round."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(repeats + 1):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            if r:
                times[name].append(time.perf_counter() - t)
    return times


def _ratio(times: dict[str, list[float]], name: str, base: str = "plain") -> float:
    """The median over rounds of ``name``'s time over ``base``'s in the same round."""
    return statistics.median(a / b for a, b in zip(times[name], times[base]))


def saved_mib(forward: Callable[[], torch.Tensor], params: list[torch.Tensor]) -> float:
    """MiB of the tensors autograd saves for backward while ``forward`` runs, each storage counted once, the
    storages of ``params`` (the weights, which a step holds anyway) left out.

    Examples:
        >>> w = torch.ones(4, 4, requires_grad=True)
        >>> saved_mib(lambda: (torch.ones(256, 4) @ w).sum(), [w]) * 2**20  # the input, 256 x 4 float32
        4096.0
    """
    weights = {p.untyped_storage().data_ptr() for p in params}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in weights:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return sum(seen.values()) / 2**20


def run(batch: int = 16, tokens: int = 64, repeats: int = 5, model: str = "smollm2-135m") -> dict:
    from transformers import AutoTokenizer

    from agentkit.eval.ir_benchmarks import load_benchmark
    from agentkit.models.catalog import resolve
    from agentkit.models.retriever import Retriever
    from agentkit.revela.attention import InBatch
    from agentkit.revela.data import Collator, chunk_text
    from agentkit.revela.model import RevelaModel, causal_lm_loss, load_lm

    data = load_benchmark("pydoc")
    texts = [c for d in list(data.corpus.values())[:200] for c in chunk_text(d["text"], 120)][:batch]
    retriever = Retriever(model, max_length=tokens, lora_r=16)
    lm = load_lm(model, lora_r=16)
    collate = Collator(retriever, AutoTokenizer.from_pretrained(str(resolve(model))), tokens, first_half=True)
    b = collate(texts)
    ids, mask = b["lm_input_ids"], b["lm_attention_mask"]
    labels = ids.masked_fill(mask == 0, -100)
    m = RevelaModel(retriever, lm, tau=1e-4, v_norm=True, log_plain=False)
    logged = RevelaModel(retriever, lm, tau=1e-4, v_norm=True, log_plain=True)
    kv_grad = RevelaModel(retriever, lm, tau=1e-4, v_norm=True, log_plain=False, kv_grad=True)
    with torch.no_grad():
        sim_real = m.similarity(b)
    sim_dense = torch.full_like(sim_real, 1 / (batch - 1)).fill_diagonal_(0)

    def plain() -> None:
        causal_lm_loss(lm, ids, mask).backward()
        lm.zero_grad()

    def plain_hf() -> None:
        lm(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        lm.zero_grad()

    def lm_side(sim: torch.Tensor, model: RevelaModel = m) -> Callable[[], None]:
        def step() -> None:
            model.lm_loss(b, sim)[0].backward()
            lm.zero_grad()

        return step

    def full() -> None:
        m(b).loss.backward()
        m.zero_grad()

    def naive() -> None:
        ctx = InBatch("record")
        with torch.no_grad():
            lm(input_ids=ids, attention_mask=mask, revela=ctx)
        kv = ctx.kv
        for i in range(batch):
            for j in range(batch):
                if i == j:
                    continue
                pair = InBatch("attend", sim=torch.ones(1, 1), key_mask=mask[j : j + 1].bool(), v_norm=True)
                pair.kv = {layer: (k[j : j + 1], v[j : j + 1]) for layer, (k, v) in kv.items()}
                loss = causal_lm_loss(lm, ids[i : i + 1], mask[i : i + 1], revela=pair)
                (sim_real[i, j] * loss).backward()
        lm.zero_grad()

    t = _timed(
        {
            "plain": plain,
            "hf": plain_hf,
            "real": lm_side(sim_real),
            "logged": lm_side(sim_real, logged),
            "dense": lm_side(sim_dense),
            "kv_grad": lm_side(sim_real, kv_grad),
            "full": full,
        },
        repeats,
    )
    t_plain, t_plain_hf, t_real, t_logged, t_dense, t_kv, t_full = (
        statistics.median(t[n]) for n in ("plain", "hf", "real", "logged", "dense", "kv_grad", "full")
    )
    weights = list(lm.parameters()) + list(retriever.parameters())
    saved = {
        "plain_lm_step": saved_mib(lambda: causal_lm_loss(lm, ids, mask), weights),
        "revela_lm_step": saved_mib(lambda: m.lm_loss(b, sim_real)[0], weights),
        "revela_lm_step_kv_grad": saved_mib(lambda: kv_grad.lm_loss(b, sim_real)[0], weights),
    }
    t_naive = _time_once(naive)  # minutes long: timed once, after the others warmed every kernel
    return {
        "model": model,
        "batch": batch,
        "max_tokens": tokens,
        "lm_tokens": int(mask.sum()),
        "sim_nonzero_pairs": int((sim_real > 0).sum()),
        "sim_attended_chunks": int((sim_real > 0).any(dim=0).sum()),  # the chunks the recording pass runs on
        "repeats": repeats,
        "plain_lm_step_s": round(t_plain, 3),
        "plain_lm_step_hf_loss_s": round(t_plain_hf, 3),
        "revela_lm_step_s": round(t_real, 3),
        "revela_lm_step_plain_loss_logged_s": round(t_logged, 3),
        "revela_lm_step_dense_sim_s": round(t_dense, 3),
        "revela_lm_step_kv_grad_s": round(t_kv, 3),
        "revela_full_step_s": round(t_full, 3),
        "naive_per_pair_step_s": round(t_naive, 3),
        "ratio_revela_lm_vs_plain": round(_ratio(t, "real"), 3),
        "ratio_revela_lm_logged_vs_plain": round(_ratio(t, "logged"), 3),
        "ratio_revela_lm_dense_vs_plain": round(_ratio(t, "dense"), 3),
        "ratio_revela_lm_kv_grad_vs_plain": round(_ratio(t, "kv_grad"), 3),
        "ratio_revela_lm_kv_grad_vs_revela_lm": round(_ratio(t, "kv_grad", "real"), 3),
        "saved_for_backward_mib": {k: round(v, 2) for k, v in saved.items()},
        "ratio_revela_full_vs_plain": round(_ratio(t, "full"), 3),
        "ratio_hf_loss_vs_plain": round(_ratio(t, "hf"), 3),
        "round_seconds": {n: [round(x, 3) for x in ts] for n, ts in t.items()},
        "ratio_naive_vs_revela_lm": round(t_naive / t_real, 2),
        "target_ratio": 1.5,
    }


def _time_once(fn: Callable[[], None]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(batch: int = 16, tokens: int = 64, repeats: int = 5, out: str | None = None) -> int:
    res = run(batch, tokens, repeats)
    print(json.dumps(res, indent=2))
    print(
        f"\nRevela step on {batch} chunks (≤ {tokens} tokens): LM side {res['ratio_revela_lm_vs_plain']}x a plain LM "
        f"step (target ≤ 1.5x; {res['ratio_revela_lm_logged_vs_plain']}x with the plain loss logged, "
        f"{res['ratio_revela_lm_dense_vs_plain']}x with every pair weighted, "
        f"{res['ratio_revela_lm_kv_grad_vs_plain']}x with kv_grad), "
        f"{res['ratio_revela_full_vs_plain']}x with the retriever; the naive per-pair way takes "
        f"{res['ratio_naive_vs_revela_lm']}x the LM side"
    )
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``): each variant's median ratio to a plain LM step."""
    mib = res["saved_for_backward_mib"]
    return (
        f"- LM side, with the real Sim at τ = 1e-4, as the paper trains (no plain loss): "
        f"**{res['ratio_revela_lm_vs_plain']:.2f}×** a plain LM step (target ≤ {res['target_ratio']}×).\n"
        f"- The same with the plain loss computed and logged (the recipe's default): "
        f"{res['ratio_revela_lm_logged_vs_plain']:.2f}×.\n"
        f"- The same with pass 1's keys and values kept in the graph (`kv_grad`, the official code's): "
        f"{res['ratio_revela_lm_kv_grad_vs_plain']:.2f}× a plain step, {res['ratio_revela_lm_kv_grad_vs_revela_lm']:.2f}× "
        f"the default LM side; autograd keeps {mib['revela_lm_step_kv_grad']:,.0f} MiB for backward against "
        f"{mib['revela_lm_step']:,.0f} MiB (a plain step: {mib['plain_lm_step']:,.0f} MiB).\n"
        f"- LM side, with a dense Sim: {res['ratio_revela_lm_dense_vs_plain']:.2f}×.\n"
        f"- The whole step, retriever included: {res['ratio_revela_full_vs_plain']:.2f}×.\n"
        f"- The naive per-pair way: {res['ratio_naive_vs_revela_lm']:.1f}× the Revela LM side."
    )


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read."""
    return {
        "LM step: Revela / plain": (res["ratio_revela_lm_vs_plain"], "lower"),
        "whole step: Revela / plain LM": (res["ratio_revela_full_vs_plain"], "lower"),
        "LM step: naive per pair / Revela": (res["ratio_naive_vs_revela_lm"], "higher"),
    }


HELP = "a Revela step on 16 chunks vs a plain LM step and a per-pair implementation"


def add_arguments(parser) -> None:
    """``agentkit bench revela``'s options: ``main``'s parameters."""
    parser.add_argument("--batch", type=number(int, 2), default=16, help="chunks per batch")
    parser.add_argument("--tokens", type=POS_INT, default=64, help="LM tokens per chunk (at most)")
    parser.add_argument("--repeats", type=POS_INT, default=5, help="timed rounds (medians reported)")
    add_out_option(parser)
