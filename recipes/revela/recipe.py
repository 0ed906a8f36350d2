"""revela: self-supervised retriever training through in-batch attention (arXiv 2506.16552), then BEIR-style
evaluation against BM25, MiniLM and the untrained retriever.

Per seed: chunks of the training corpus (the benchmark's documents; never its queries) in batches of
``batch_size``, each step the Revela loss (``agentkit.revela.model``) through ``accelerate`` (every process takes
its share of the batches, gradients are averaged), LoRA on retriever and LM. Checkpoints (trainable weights,
optimizer, step) every ``checkpoint_every`` steps under ``state/seed-<s>/``; the trained retriever is saved to
``retrievers/seed-<s>/`` (load it with ``Retriever.load`` or ``agentkit tool-server search --retriever``).
Evaluations are recorded as they finish, so ``--resume`` redoes only unfinished work.
"""

from __future__ import annotations

import io
import itertools
import random
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from agentkit.errors import AgentkitError
from agentkit.eval.ir_benchmarks import load_benchmark
from agentkit.eval.retrieval import bm25_run, dense_run, score_run
from agentkit.eval.stats import mean_std, paired_delta
from agentkit.files import atomic_dir, atomic_write
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.revela.config import RevelaConfig
from agentkit.revela.data import Collator, bm25_batches, chunk_documents, interleaved_batches, load_documents

METRIC_KEYS = ("ndcg@10", "recall@100", "mrr")


class RevelaRecipe(Recipe[RevelaConfig]):
    name = "revela"
    config_cls = RevelaConfig
    description = "Revela retriever training (no queries) vs BM25, MiniLM and the untrained retriever"

    def setup(self) -> None:
        from accelerate import Accelerator

        c = self.config
        if c.streaming and c.batching == "bm25":
            raise AgentkitError("revela: bm25 batching needs the whole corpus in memory", "use batching=interleave")
        if c.streaming and not c.corpus:
            raise AgentkitError("revela: streaming reads 'corpus'", "set corpus=PATH, or streaming=false")
        self.data = load_benchmark(c.benchmark, c.bench_docs, c.bench_queries, c.bench_seed)  # bad input fails here
        source = c.corpus or self._benchmark_folder()
        self.chunks = chunk_documents(load_documents(source, streaming=c.streaming), c.max_words)
        if not c.streaming:
            self.texts: list[str] = self.chunks["text"]
            if len(self.texts) < c.batch_size:
                raise AgentkitError(f"revela: {len(self.texts)} chunks, fewer than batch_size={c.batch_size}")
        self.accelerator = Accelerator(cpu=not torch.cuda.is_available())

    def _benchmark_folder(self) -> str:
        from agentkit.eval.ir_benchmarks import BENCHMARKS, benchmark_dir

        c = self.config
        return (
            str(benchmark_dir(c.benchmark, c.bench_docs, c.bench_queries, c.bench_seed))
            if c.benchmark in BENCHMARKS
            else c.benchmark
        )

    # ---- evaluation -------------------------------------------------------------------------------------------
    def _evaluate(self, method: str) -> dict[str, float]:
        from agentkit.models.retriever import Retriever

        c = self.config
        t0 = time.time()
        if method == "bm25":
            run = bm25_run(self.data)
        else:
            if method.startswith("seed-"):
                r = Retriever.load(self._retriever_dir(method))
            else:
                base = {"minilm": "minilm-l6", "untrained": c.retriever}[method]
                r = Retriever(base, max_length=c.retriever_max_tokens)
            run = dense_run(self.data, lambda texts, kind: r.encode(texts, kind, c.encode_batch, not self.ctx.quiet))
        scores = score_run(self.data.qrels, run, per_query=True)
        return {**scores, "seconds": round(time.time() - t0, 1)}

    def _retriever_dir(self, run: str) -> Path:
        return self.ctx.run_dir / "retrievers" / run

    # ---- training -----------------------------------------------------------------------------------------------
    def _batches(self, seed: int) -> Iterator[list[str]]:
        c = self.config
        if c.batching == "bm25":
            return ([self.texts[i] for i in b] for b in bm25_batches(self.texts, c.batch_size, seed))
        rows = iter(self.chunks)
        if not c.streaming:  # documents in a seeded order, each document's chunks together and in order
            by_doc: dict[str, list[dict]] = {}
            for row in self.chunks:
                by_doc.setdefault(row["doc_id"], []).append(row)
            docs = sorted(by_doc)
            random.Random(seed).shuffle(docs)
            rows = (r for d in docs for r in by_doc[d])
        return ([r["text"] for r in b] for b in interleaved_batches(rows, c.batch_size, c.docs_per_batch))

    def _train_seed(self, seed: int) -> None:
        from transformers import AutoTokenizer

        from agentkit.models.catalog import resolve
        from agentkit.models.retriever import Retriever
        from agentkit.revela.model import RevelaModel, load_lm

        c, acc = self.config, self.accelerator
        torch.manual_seed(seed)
        retriever = Retriever(c.retriever, max_length=c.retriever_max_tokens, lora_r=c.retriever_lora_r, seed=seed)
        lm = load_lm(c.lm, c.lm_lora_r, seed=seed)
        bos = lm.config.model_type.startswith("gemma")  # Gemma is trained with BOS first; GGUF tokenizers omit it
        collate = Collator(
            retriever, AutoTokenizer.from_pretrained(str(resolve(c.lm))), c.max_tokens, c.first_half, bos
        )
        model = RevelaModel(retriever, lm, c.tau, c.v_norm, c.dual_loss, c.kv_grad, c.log_plain)
        ret_params = [p for p in retriever.parameters() if p.requires_grad]
        lm_params = [p for p in lm.parameters() if p.requires_grad]
        params = ret_params + lm_params
        opt = torch.optim.AdamW([{"params": ret_params}, {"params": lm_params}], lr=c.lr, weight_decay=0.0)

        def warm(s: int) -> float:
            return min(1.0, (s + 1) / (c.warmup + 1))

        def warm_retriever(s: int) -> float:  # frozen while the LM first learns to read in-batch context
            return 0.0 if s < c.retriever_freeze_steps else warm(s - c.retriever_freeze_steps)

        sched = torch.optim.lr_scheduler.LambdaLR(opt, [warm_retriever, warm])
        state_file = self.ctx.run_dir / "state" / f"seed-{seed}" / "checkpoint.pt"
        start = 0
        if state_file.exists():
            ck = torch.load(state_file, weights_only=False)
            model.load_state_dict(ck["trainable"], strict=False)
            opt.load_state_dict(ck["optimizer"])
            sched.load_state_dict(ck["scheduler"])
            start = ck["step"]
        model, opt = acc.prepare(model, opt)
        per_step = c.grad_accum * acc.num_processes
        batches = itertools.islice(self._batches(seed), start * per_step, None)  # resume: skip what was trained
        mine = (b for k, b in enumerate(batches) if k % acc.num_processes == acc.process_index)
        model.train()
        for step in self.ctx.progress(range(start, c.steps), desc=f"revela seed {seed}", total=c.steps - start):
            t0, stats = time.time(), []
            for _ in range(c.grad_accum):
                texts = next(mine, None)
                if texts is None:
                    raise AgentkitError(f"revela: the corpus ran out of batches at step {step}", "lower steps")
                out = model(collate(texts))
                acc.backward(out.loss / c.grad_accum)
                stats.append(_sim_stats(out))
            grad_norm = float(acc.clip_grad_norm_(params, 1.0))
            opt.step()
            sched.step()
            opt.zero_grad()
            row = {k: statistics.fmean(s[k] for s in stats) for k in stats[0]}
            self.ctx.log({"run": f"seed-{seed}", **row, "grad_norm": grad_norm, "sec": time.time() - t0}, step=step + 1)
            if (step + 1) % c.checkpoint_every == 0 or step + 1 == c.steps:
                self._checkpoint(acc.unwrap_model(model), opt, sched, step + 1, state_file)
        if self.ctx.is_main:
            atomic_dir(self._retriever_dir(f"seed-{seed}"), acc.unwrap_model(model).retriever.save, marker=".complete")
        acc.wait_for_everyone()

    def _checkpoint(self, model, opt, sched, step: int, path: Path) -> None:
        if not self.ctx.is_main:
            return
        trainable = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
        buf = io.BytesIO()
        torch.save({"trainable": trainable, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "step": step}, buf)  # fmt: skip
        atomic_write(path, buf.getvalue())

    # ---- the recipe ---------------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        c = self.config
        results = self.ctx.done("eval")
        for method in c.baselines:
            if method not in results:
                results[method] = self._evaluate(method) if self.ctx.is_main else {}
                self.ctx.record("eval", {method: results[method]})
        for seed in c.seeds:
            key = f"seed-{seed}"
            if key in results:
                continue
            if not (self._retriever_dir(key) / ".complete").exists():
                self._train_seed(seed)
            if self.ctx.is_main:
                results[key] = self._evaluate(key)
                self.ctx.record("eval", {key: results[key]})
            self.accelerator.wait_for_everyone()
        self.results = results
        return {}

    def evaluate(self) -> dict[str, Any]:
        c, res = self.config, self.results
        if not self.ctx.is_main:
            return {}
        metrics: dict[str, Any] = {}
        for m in c.baselines:
            metrics.update({f"{m}/{k}": res[m][k] for k in METRIC_KEYS})
        trained = [res[f"seed-{s}"] for s in c.seeds]
        for k in METRIC_KEYS:
            vals = [r[k] for r in trained]
            m, sd = mean_std(vals)
            metrics[f"revela/{k}"], metrics[f"revela/{k}_std"] = round(m, 4), round(sd, 4)
        # Per query, the seeds' mean nDCG@10 against each reference: the gap and its paired-bootstrap 95 % interval
        per_q = [r.get("ndcg@10_per_query") for r in trained]
        if all(per_q):
            mean_q = [statistics.fmean(v) for v in zip(*per_q)]
            for ref in self._references():
                d, lo, hi = paired_delta(mean_q, res[ref]["ndcg@10_per_query"])
                metrics[f"revela/delta_ndcg@10_vs_{ref}"] = [round(d, 4), round(lo, 4), round(hi, 4)]
        self._report(metrics)
        return metrics

    def _references(self) -> list[str]:
        """The baselines to compare the trained retriever with, query by query: the retriever before training
        (``untrained``, or ``minilm`` when MiniLM is the retriever trained) and BM25."""
        c, res = self.config, self.results
        refs = [m for m in c.baselines if "ndcg@10_per_query" in res.get(m, {})]
        before = "untrained" if "untrained" in refs or c.retriever != "minilm-l6" else "minilm"
        return sorted(refs, key=lambda m: m != before)  # stable: the before-training one first

    def _report(self, metrics: dict[str, Any]) -> None:
        c, res = self.config, self.results
        rows = ["| retriever | nDCG@10 | Recall@100 | MRR | eval s |", "|---|---|---|---|---|"]
        names = {"bm25": "BM25 (bm25s)", "minilm": "all-MiniLM-L6-v2", "untrained": f"{c.retriever}, untrained"}
        for m in c.baselines:
            r = res[m]
            rows.append(
                f"| {names[m]} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} | {r['mrr']:.4f} | {r['seconds']} |"
            )
        for s in c.seeds:
            r = res[f"seed-{s}"]
            rows.append(f"| Revela {c.retriever}, seed {s} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} | "
                        f"{r['mrr']:.4f} | {r['seconds']} |")  # fmt: skip
        m = metrics
        rows.append(f"| **Revela, mean ± std over {len(c.seeds)} seeds** | {m['revela/ndcg@10']:.4f} ± "
                    f"{m['revela/ndcg@10_std']:.4f} | {m['revela/recall@100']:.4f} ± {m['revela/recall@100_std']:.4f}"
                    f" | {m['revela/mrr']:.4f} ± {m['revela/mrr_std']:.4f} | |")  # fmt: skip
        gaps = [
            f"- against {names[ref]}: {d:+.4f} nDCG@10, 95 % interval [{lo:+.4f}, {hi:+.4f}]"
            for ref in self._references()
            for d, lo, hi in [m[f"revela/delta_ndcg@10_vs_{ref}"]]
        ]
        if gaps:
            rows += ["", "The trained retriever (per query, the mean over seeds) against each baseline, with a paired "
                     "bootstrap interval over queries (10,000 resamples):", *gaps]  # fmt: skip
        meta = self.data.meta
        self.ctx.add_section(
            "Retrieval",
            f"Benchmark **{self.data.name}**: {len(self.data.corpus)} documents, {len(self.data.queries)} queries"
            f" ({meta.get('note', '')})."
            + (  # pydoc is built from the running interpreter's stdlib, so its content follows the Python version
                f" Built under Python {meta['python']} from {meta['source_pairs']} source pairs."
                if "python" in meta and "source_pairs" in meta
                else ""
            )
            + "\n\n"
            + "\n".join(rows),
        )
        self._plot()

    def _plot(self) -> None:
        import json

        rows = [json.loads(x) for x in (self.ctx.run_dir / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in rows if "loss_inbatch" in r]
        if not steps:
            return
        plt = pyplot()
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
        saved = all("loss_plain" in r for r in steps)  # log_plain off: the in-batch loss itself is plotted
        for run in sorted({r["run"] for r in steps}):
            rs = [r for r in steps if r["run"] == run]
            x = [r["step"] for r in rs]
            y = [r["loss_plain"] - r["loss_inbatch"] if saved else r["loss_inbatch"] for r in rs]
            a.plot(x, y, marker=".", label=run)
            b.plot(x, [r["sim_top1"] for r in rs], marker=".", label=run)
        if saved:
            a.axhline(0, color="grey", lw=0.8)
            a.set(xlabel="step", ylabel="plain − in-batch loss (nats)", title="What the in-batch context saves the LM")
        else:
            a.set(xlabel="step", ylabel="in-batch loss (nats)", title="LM loss with the in-batch context")
        b.set(xlabel="step", ylabel="mean max Sim_ij", title="How peaked the retriever's Sim is")
        a.legend(fontsize=7)
        b.legend(fontsize=7)
        caption = (
            "the LM loss the in-batch context saves on each batch (above 0: the retrieved chunks help)"
            if saved
            else "the LM's in-batch loss per batch (log_plain off: no plain loss to compare)"
        )
        self.ctx.save_plot(fig, "training", f"Training: {caption}")


def _sim_stats(out) -> dict[str, float]:
    sim = out.sim.detach()
    plain = {} if out.loss_plain is None else {"loss_plain": out.loss_plain}  # log_plain off: not computed
    return {
        "loss": float(out.loss.detach()),
        "loss_inbatch": out.loss_inbatch,
        **plain,
        "sim_top1": float(sim.max(dim=-1).values.mean()),
        "sim_pairs": float((sim > 0).sum()),  # pairs that cost an attention (weight ≠ 0)
    }
