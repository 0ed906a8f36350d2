"""Side-by-side tables of `uncertainty score` runs (their metrics.json) and each model's greedy accuracy.

Usage: python compare.py GENS.jsonl REPORT_DIR [REPORT_DIR ...] > comparison.md
"""

import json
import sys
from pathlib import Path

import numpy as np

from agentkit.uncertainty.schema import iter_generations
from agentkit.uncertainty.score import judge

gens, runs = sys.argv[1], sys.argv[2:]
rows = [r for _, r in iter_generations(gens)]
models = list(rows[0].samples)
print("| model | greedy accuracy (all) | arithmetic-easy | multihop-open |")
print("|---|---|---|---|")
for m in models:
    c = np.array([judge(r, r.greedy[m], "auto", 0.5) for r in rows])
    ar = np.array([r.id.startswith("easy-arith") for r in rows])
    print(f"| {m} | {c.mean():.3f} | {c[ar].mean():.3f} | {c[~ar].mean():.3f} |")
res = [json.loads((Path(r) / "metrics.json").read_text()) for r in runs]
print()
print(
    "| estimator | "
    + " | ".join(f"AUROC ({Path(r).name})" for r in runs)
    + " | "
    + " | ".join(f"PRR ({Path(r).name})" for r in runs)
    + " |"
)
print("|---" * (1 + 2 * len(runs)) + "|")


def ci(m, k):
    lo, hi = m[f"{k}_ci"]
    return f"{m[k]:.3f} [{lo:.2f}, {hi:.2f}]"


for name in res[0]["estimators"]:
    print(
        f"| {name} | "
        + " | ".join(ci(x["estimators"][name], "auroc") for x in res)
        + " | "
        + " | ".join(ci(x["estimators"][name], "prr") for x in res)
        + " |"
    )
print()
for r, x in zip(runs, res):
    cf = x["confident_failures"]
    print(
        f"{Path(r).name}: models {x['models']}; rho(AU,EU) {x['au_eu_spearman']:.3f}; confident failures {cf['confident_failures']}, EU flags {cf['confident_failures_flagged_by_eu']} "
        f"(rate {cf['eu_flag_rate_confident_failures']:.3f} vs {cf['eu_flag_rate_confident_correct']:.3f} on confident correct); errors caught by EU alone {cf['errors_flagged_by_eu_not_au']} of {cf['errors']} ({cf['share_errors_flagged_by_eu_not_au']:.3f})"
    )
