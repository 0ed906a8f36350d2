"""``agentkit run`` (a recipe) and ``agentkit recipes list``."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence

from agentkit.command import Command
from agentkit.errors import AgentkitError


class RunCommand(Command):
    name = "run"
    help = "run a recipe"
    description = (
        "Run a recipe by name (config: the dataclass defaults < the recipe's default.yaml or --preset < --set) or "
        "from a YAML file whose 'recipe:' key names it. Writes outputs/<recipe>/<timestamp>/: config.yaml, "
        "metrics.jsonl, report.md with plots, state/ (checkpoints and finished work for --resume)."
    )
    add_help = False  # its own --help also lists the recipe's config keys

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-h",
            "--help",
            action=_RunHelp,
            nargs=0,
            help="show this help; after a recipe, also its config keys with types, defaults and docs",
        )
        parser.add_argument("recipe", help="recipe name (see `agentkit recipes list`) or FILE.yaml")
        parser.add_argument(
            "--set",
            dest="sets",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config field, dotted for nested ones (repeatable)",
        )
        parser.add_argument("--preset", help="use <recipe>/<PRESET>.yaml instead of default.yaml (e.g. tiny)")
        parser.add_argument("--output-dir", help="the run directory (default outputs/<recipe>/<timestamp>)")
        parser.add_argument(
            "--resume",
            nargs="?",
            const=True,
            default=False,
            metavar="RUN_DIR",
            help="continue an interrupted run: RUN_DIR, --output-dir, or the latest run of the recipe",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="with --resume: accept --set values that change the run's config (recorded in the run)",
        )
        parser.add_argument("--quiet", action="store_true", help="no progress bars")
        parser.add_argument(
            "--report-to",
            default="none",
            help="trackers, comma-separated: tensorboard, mlflow (a local store), wandb (offline), trackio; the "
            "trainers report to them and the run's metrics are mirrored there, all inside the run directory "
            "(default: none)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from agentkit.runner import run_recipe

        metrics, run_dir = run_recipe(
            args.recipe,
            args.sets,
            output_dir=args.output_dir,
            resume=args.resume,
            preset=args.preset,
            quiet=args.quiet,
            report_to=args.report_to,
            force=args.force,
        )
        print(f"run directory: {run_dir}")
        for k, v in metrics.items():
            print(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}")
        return 0


class _RunHelp(argparse.Action):
    """``agentkit run RECIPE --help``: the command's help, then every config key of RECIPE (nested ones dotted)
    with its type, its default (after the recipe's default.yaml) and its doc, as TRL's parser prints them."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help()
        if getattr(namespace, "recipe", None):
            try:
                sets = getattr(namespace, "sets", None) or []
                print("\n" + recipe_help(namespace.recipe, sets, getattr(namespace, "preset", None)))
            except AgentkitError as e:
                parser.error(str(e))
        parser.exit()


def recipe_help(spec: str, sets: Sequence[str] = (), preset: str | None = None) -> str:
    """Every config key of a recipe (nested ones dotted) with its type, default and help.

    Args:
        spec: a recipe name or a YAML file naming one.
        sets: ``--set`` items given before ``--help``: the defaults shown include them (``--set engine.kind=vllm
            --help`` lists the vllm engine's options).
        preset: the preset whose YAML gives the defaults.

    Returns:
        The listing, one key per line, its doc wrapped under it.
    """
    from agentkit.config import build_config, describe, parse_sets
    from agentkit.runner import resolve_spec

    name, cls, layer = resolve_spec(spec, preset)
    cfg = build_config(cls.config_cls, layer, parse_sets(list(sets)), check=False)
    lines = [f"config of recipe {name!r} (KEY: TYPE = DEFAULT; defaults < the recipe's YAML < --set KEY=VALUE):"]
    for key, tp, value, doc in describe(cfg):
        lines.append(f"  {key}.*" if tp == "section" else f"  {key}: {tp} = {value!r}")
        if doc:
            lines += textwrap.wrap(doc, 110, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)


class RecipesCommand(Command):
    name = "recipes"
    help = "list recipes"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="registered recipes (built-in and from the agentkit.recipes entry point)")

    def run(self, args: argparse.Namespace) -> int:
        from agentkit.runner import RECIPES

        for name in RECIPES.names():
            try:
                desc = RECIPES.get(name).description
            except Exception as e:  # a broken third-party plugin must not hide the others
                desc = f"(cannot import: {e})"
            print(f"{name:28s} {desc}")
        return 0
