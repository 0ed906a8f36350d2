"""``agentkit models list|prepare``: the model catalog."""

from __future__ import annotations

import argparse

from agentkit.command import Command
from agentkit.errors import AgentkitError


class ModelsCommand(Command):
    name = "models"
    help = "the model catalog"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="name, family, parameters, installed or not, path")
        prepare = actions.add_parser("prepare", help="convert a catalog model into the safetensors cache now")
        prepare.add_argument("name", help="catalog name (see `agentkit models list`)")

    def run(self, args: argparse.Namespace) -> int:
        from agentkit.models.catalog import CATALOG, _is_complete, materialize

        if args.action == "prepare":
            if args.name not in CATALOG:
                from agentkit.errors import did_you_mean

                raise AgentkitError(f"unknown model {args.name!r}", did_you_mean(args.name, CATALOG))
            print(materialize(CATALOG[args.name]))
            return 0
        print(f"{'name':14s} {'family':18s} {'kind':9s} {'params':7s} {'installed':10s} path")
        for info in CATALOG.values():
            ok = info.installed()
            if info.name == "minilm-l6" and ok:
                from agentkit.models.catalog import _minilm_dir

                path = str(_minilm_dir(None))  # type: ignore[arg-type]
            else:
                d = info.cache_dir()
                path = str(d) + ("" if _is_complete(d) else "  (converted on first use)")
            print(
                f"{info.name:14s} {info.family:18s} {info.kind:9s} {info.params:7s} {'yes' if ok else 'no':10s} "
                f"{path if ok else info.install_hint}"
            )
        return 0
