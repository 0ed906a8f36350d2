"""``agentkit revela benchmark|eval``: build the retrieval benchmarks, score any retriever on a BEIR folder."""

from __future__ import annotations

import argparse
import json

from agentkit.argtypes import POS_INT
from agentkit.command import Command


class RevelaCommand(Command):
    name = "revela"
    help = "Revela: build retrieval benchmarks, evaluate retrievers"
    description = "Benchmarks are BEIR folders (corpus.jsonl, queries.jsonl, qrels/test.tsv, meta.json)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        a = parser.add_subparsers(dest="action", required=True)
        b = a.add_parser("benchmark", help="build a benchmark from this machine's text: debian or pydoc")
        b.add_argument("name", choices=["debian", "pydoc"], help="the source")
        b.add_argument("--docs", type=POS_INT, default=1500, help="documents in the corpus (default: 1500)")
        b.add_argument("--queries", type=POS_INT, default=300, help="queries (default: 300)")
        b.add_argument("--seed", type=int, default=0, help="the draw (default: 0)")
        b.add_argument("--out", help="folder to write (default: $AGENTKIT_HOME/benchmarks/NAME-dD-qQ-sS)")
        e = a.add_parser("eval", help="nDCG@10, Recall@100 and MRR of a retriever on a benchmark")
        e.add_argument("benchmark", help="debian, pydoc, or a BEIR folder")
        e.add_argument(
            "--retriever",
            default="bm25",
            help="bm25, a model (minilm-l6, smollm2-135m) or a trained retriever's folder",
        )
        e.add_argument("--docs", type=POS_INT, default=1500, help="built-in benchmarks: documents (default: 1500)")
        e.add_argument("--queries", type=POS_INT, default=300, help="built-in benchmarks: queries (default: 300)")
        e.add_argument("--batch-size", type=POS_INT, default=32, help="texts per encoding batch (default: 32)")

    def run(self, a: argparse.Namespace) -> int:
        from pathlib import Path

        from agentkit.eval.ir_benchmarks import benchmark_dir, build_benchmark, load_benchmark
        from agentkit.eval.retrieval import bm25_run, dense_run, score_run, write_beir

        if a.action == "benchmark":
            if a.out:
                path = write_beir(Path(a.out), build_benchmark(a.name, a.docs, a.queries, a.seed))
            else:
                path = benchmark_dir(a.name, a.docs, a.queries, a.seed)
            meta = json.loads((path / "meta.json").read_text())
            print(f"{path}: {meta['documents']} documents, {meta['queries']} queries")
            return 0
        data = load_benchmark(a.benchmark, a.docs, a.queries)
        if a.retriever == "bm25":
            run = bm25_run(data)
        else:
            from agentkit.models.retriever import Retriever

            r = Retriever.load(a.retriever)
            run = dense_run(data, lambda texts, kind: r.encode(texts, kind, a.batch_size, progress=True))
        print(json.dumps({"benchmark": data.name, "retriever": a.retriever, **score_run(data.qrels, run)}))
        return 0
