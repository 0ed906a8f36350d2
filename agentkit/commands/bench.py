"""``agentkit bench NAME``: the benchmarks (``agentkit.eval.bench.BENCHES``), each owning its options."""

from __future__ import annotations

import argparse

from agentkit.command import Command

_GLOBAL = ("command", "target", "debug")  # the namespace's keys that are not a benchmark's options


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

    def run(self, args: argparse.Namespace) -> int:
        options = {k: v for k, v in vars(args).items() if not k.startswith("_") and k not in _GLOBAL}
        return args._bench.main(**options)
