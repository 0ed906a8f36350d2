"""Revela's τ and kv_grad ablation on pydoc (MiniLM retriever, Gemma 3 270M as the LM, 3 seeds each), all three
runs on the same build of the benchmark: each variant against the default (τ = 0.02, kv_grad off), query by query
(nDCG@10 of the mean over seeds), with agentkit's paired bootstrap. Run from the repository root:

    python docs/results/revela/ablation/compare.py

It reads each run's state/eval.jsonl and writes ablation.json and ablation.md beside this file.
"""

import json
import statistics
from pathlib import Path

from agentkit.eval.stats import mean_std, paired_delta

HERE = Path(__file__).parent
RUNS = {  # name: (run folder, what differs from the default)
    "default": ("pydoc-py3.11", "τ = 0.02, kv_grad off (the recipe's defaults)"),
    "tau-1e-4": ("pydoc-tau-1e-4", "τ = 1e-4 (the paper's)"),
    "kv-grad": ("pydoc-kv-grad", "kv_grad on (pass 1's keys/values in the graph, as the official code)"),
}


def per_query(run: str) -> tuple[list[float], list[float], list[float]]:
    """(seed-mean nDCG@10 per query, each seed's nDCG@10, untrained MiniLM's per query) of one run."""
    rows = {}
    for line in (HERE.parent / run / "state" / "eval.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows[r["key"]] = r["value"]
    seeds = [v for k, v in sorted(rows.items()) if k.startswith("seed-")]
    mean_q = [statistics.mean(q) for q in zip(*(s["ndcg@10_per_query"] for s in seeds))]
    return mean_q, [s["ndcg@10"] for s in seeds], rows["minilm"]["ndcg@10_per_query"]


def main() -> None:
    have = {n: per_query(run) for n, (run, _) in RUNS.items() if (HERE.parent / run / "report.md").exists()}
    base_q = have["default"][0]
    out, lines = (
        {},
        [
            "| variant | nDCG@10 (mean ± std over seeds) | against untrained MiniLM | against the default (τ = 0.02) |",
            "|---|---|---|---|",
        ],
    )
    for name, (mean_q, seeds, minilm) in have.items():
        vs_minilm = paired_delta(mean_q, minilm)
        vs_default = paired_delta(mean_q, base_q) if name != "default" else None
        m, sd = mean_std(seeds)
        out[name] = {
            "run": RUNS[name][0],
            "ndcg@10_mean": m,
            "ndcg@10_std": sd,
            "ndcg@10_seeds": seeds,
            "delta_vs_minilm": vs_minilm,
            "delta_vs_default": vs_default,
        }
        fmt = lambda d: f"{d[0]:+.4f} [{d[1]:+.4f}, {d[2]:+.4f}]"  # noqa: E731
        lines.append(
            f"| {RUNS[name][1]} | {m:.4f} ± {sd:.4f} | {fmt(vs_minilm)} | "
            + (fmt(vs_default) if vs_default else "—")
            + " |"
        )
    (HERE / "ablation.json").write_text(json.dumps(out, indent=1) + "\n")
    (HERE / "ablation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
