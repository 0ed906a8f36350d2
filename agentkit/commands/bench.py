"""``agentkit bench NAME``: the benchmarks (``agentkit.eval.bench.BENCHES``), each owning its options; and
``agentkit bench summary`` / ``agentkit bench compare``, which read their JSON results."""

from __future__ import annotations

import argparse

from agentkit.argtypes import NONNEG_FLOAT
from agentkit.command import Command

_GLOBAL = ("command", "target", "debug")  # the namespace's keys that are not a benchmark's options
RECORDED = "docs/results/bench"  # the results the benchmarks page shows


class BenchCommand(Command):
    name = "bench"
    help = "benchmarks"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from agentkit.eval.bench import BENCHES

        targets = parser.add_subparsers(dest="target", required=True)
        for name in BENCHES.names():
            module = BENCHES.get(name)
            sub = targets.add_parser(name, help=module.HELP)
            module.add_arguments(sub)
            sub.set_defaults(_bench=module)
        sub = targets.add_parser("summary", help="one table of every result's ratios")
        sub.add_argument(
            "path", nargs="?", default=RECORDED, help=f"a result (NAME.json) or a folder of them (default: {RECORDED})"
        )
        sub.set_defaults(_bench=None)
        sub = targets.add_parser("compare", help="flag every ratio that fell by more than a margin from OLD to NEW")
        sub.add_argument("old", help="a result (NAME.json) or a folder of them: the recorded run")
        sub.add_argument("new", help="the same for the new run")
        sub.add_argument(
            "--margin", type=NONNEG_FLOAT, default=0.1, help="relative fall that is flagged (default: 0.1 = 10%%)"
        )
        sub.set_defaults(_bench=None)
        sub = targets.add_parser("page", help="rewrite docs/benchmarks.md's result blocks from docs/results/bench")
        sub.add_argument("--check", action="store_true", help="change nothing; exit 1 when the page is out of date")
        sub.set_defaults(_bench=None)

    def run(self, args: argparse.Namespace) -> int:
        if args.target == "page":
            return _page(args.check)
        if args.target == "summary":
            return _summary(args.path)
        if args.target == "compare":
            return _compare(args.old, args.new, args.margin)
        options = {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in _GLOBAL}
        return args._bench.main(**options)


def _summary(path: str) -> int:
    from agentkit.eval.bench import BENCHES, summary

    rows = summary(path)
    seen = {r["bench"] for r in rows}
    print("| bench | ratio | value | better | commit |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['bench']} | {r['ratio']} | {r['value']:g} | {r['better']} | {r['commit']} |")
    missing = [n for n in BENCHES.names() if n not in seen]
    if missing:
        print(f"\nno result under {path} for: {', '.join(missing)}")
    return 0


def _compare(old: str, new: str, margin: float) -> int:
    from agentkit.eval.bench import compare

    rows = compare(old, new, margin)
    if not rows:
        print(f"no ratio in both {old} and {new}")
        return 0
    print("| bench | ratio | old | new | change | |\n|---|---|---|---|---|---|")
    for r in rows:
        flag = f"FELL (> {margin:.0%})" if r["fell"] else ""
        print(f"| {r['bench']} | {r['ratio']} | {r['old']:g} | {r['new']:g} | {r['change']:+.1%} | {flag} |")
    fell = [r for r in rows if r["fell"]]
    print(f"\n{len(fell)} of {len(rows)} ratios fell by more than {margin:.0%}")
    return 1 if fell else 0


def _page(check: bool) -> int:
    from agentkit.eval.bench import PAGE, render_page
    from agentkit.files import atomic_write

    new = render_page()
    if new == PAGE.read_text():
        print(f"{PAGE} is up to date with its results")
        return 0
    if check:
        print(f"{PAGE} is out of date with its results: run agentkit bench page")
        return 1
    atomic_write(PAGE, new)
    print(f"{PAGE} rewritten from its results")
    return 0
