"""``agentkit gamerl export|levels|code2logic``: write game datasets as HF datasets; turn a new game's code into tasks."""

from __future__ import annotations

import argparse
import json

from agentkit.argtypes import NONNEG_INT, POS_INT
from agentkit.command import Command, add_engine_options, engine_from_args


class GameRLCommand(Command):
    name = "gamerl"
    help = "Game-RL: export game datasets, Code2Logic on a new game's code"
    description = (
        "Game datasets in GameQA's schema; Code2Logic drafts templates with a model and validates them "
        "by running the game's code in the sandbox."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        g = parser.add_subparsers(dest="action", required=True)
        e = g.add_parser("export", help="a game dataset (or a composite) as an HF dataset saved to disk")
        e.add_argument("games", help="comma-separated game names (several: a composite, equal weights)")
        e.add_argument("--size", type=POS_INT, default=500, help="entries (default: 500)")
        e.add_argument("--seed", type=int, default=0, help="the draw (default: 0)")
        e.add_argument("--level", default="Easy", help="Easy, Medium, Hard or mixed (default: Easy)")
        e.add_argument("--format", default="mixed", help="fill, choice or mixed (default: mixed)")
        e.add_argument("--images", action="store_true", help="add the image column: each state's PNG (default: off)")
        e.add_argument(
            "--board",
            default="text",
            choices=["text", "image"],
            help="text: the board written out in each question; image: only in the picture (implies --images) "
            "(default: text)",
        )
        e.add_argument("--out", required=True, help="folder to save the dataset to (datasets.load_from_disk reads it)")
        e.add_argument("--force", action="store_true", help="write into --out even if it holds other files")
        v = g.add_parser(
            "levels",
            help="what a level changes on the generators: mean board and analysis characters per game and level",
        )
        v.add_argument("games", nargs="?", default=None, help="comma-separated game names (default: every game)")
        v.add_argument("--per-level", type=POS_INT, default=40, help="entries drawn per game and level (default: 40)")
        v.add_argument("--seed", type=int, default=0, help="the draw (default: 0)")
        v.add_argument("--out", default=None, help="also write the figures to this JSON file (default: print only)")
        c = g.add_parser(
            "code2logic",
            help="draft task templates for a game file with a model, validate them by running it; or first have "
            "the model write the game from --description",
        )
        c.add_argument("game_file", nargs="?", help="the game's Python file (omit with --description)")
        c.add_argument(
            "--description",
            default=None,
            help="the game in words: the model writes its code first (Code2Logic's first step), validated by "
            "running it; the first accepted draft goes on to templates (default: none, use game_file)",
        )
        c.add_argument("--name", default=None, help="with --description: the game's name (its file's stem)")
        c.add_argument("--games", type=POS_INT, default=8, help="with --description: game drafts (default: 8)")
        add_engine_options(c, "the drafting model", base_url="base_url")
        c.add_argument(
            "--drafts", type=NONNEG_INT, default=16, help="templates drafted; 0: only --templates (default: 16)"
        )
        c.add_argument("--instances", type=POS_INT, default=8, help="tasks instantiated per template (default: 8)")
        c.add_argument(
            "--templates", default=None, help="a JSONL file of templates to validate as well (default: none)"
        )
        c.add_argument("--seed", type=int, default=0, help="sampling and instance seeds (default: 0)")
        c.add_argument("--out", required=True, help="folder for templates.jsonl, tasks.jsonl and summary.json")
        c.add_argument("--force", action="store_true", help="write into --out even if it holds other files")

    def run(self, a: argparse.Namespace) -> int:
        from pathlib import Path

        from agentkit.errors import AgentkitError
        from agentkit.files import claim_output_dir

        if a.action == "export":
            from agentkit.gamerl.dataset import create_dataset, to_hf

            claim_output_dir(a.out, "gamerl export", a.force)
            games = [x for x in a.games.split(",") if x]
            cfg = {"level": a.level, "format": a.format, "board": a.board}
            if len(games) == 1:
                ds = create_dataset(games[0], a.size, a.seed, **cfg)
            else:
                ds = create_dataset("composite", a.size, a.seed, datasets=[{"name": g, "config": cfg} for g in games])
            hf = to_hf(list(ds), images=a.images or a.board == "image")
            hf.save_to_disk(a.out)
            print(f"{a.out}: {len(hf)} rows, columns {', '.join(hf.column_names)}")
            return 0
        if a.action == "levels":
            return _levels(a)
        from agentkit.data.tasks import read_jsonl
        from agentkit.gamerl.code2logic import code2logic

        if a.description is not None:
            return _from_description(a)
        if a.game_file is None:
            raise AgentkitError("code2logic needs a game file or --description", "give one of them")
        if not Path(a.game_file).is_file():
            raise AgentkitError(f"{a.game_file}: no such file", "give the path of the game's Python file")
        try:
            Path(a.game_file).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise AgentkitError(f"{a.game_file} is not UTF-8 text", "give the game's Python source file") from None
        if not a.drafts and not a.templates:
            raise AgentkitError(
                "--drafts 0 without --templates leaves nothing to validate", "draft some, or give a file"
            )
        given = read_jsonl(a.templates) if a.templates else []
        engine_cfg = engine_from_args(a) if a.drafts else None  # its options checked before anything is written
        claim_output_dir(a.out, "gamerl code2logic", a.force)
        engine = engine_cfg.build() if engine_cfg else None
        try:
            result = code2logic(engine, a.game_file, a.drafts, a.instances, given, a.seed)
        finally:
            if engine is not None:
                engine.close()
        result.save(Path(a.out))
        print(json.dumps({"game": result.game, **result.counts}))
        return 0


def _from_description(a: argparse.Namespace) -> int:
    """``code2logic --description``: the model writes the game, then its templates."""
    from agentkit.errors import AgentkitError
    from agentkit.files import claim_output_dir
    from agentkit.gamerl.gamegen import code2logic_from_description

    if a.game_file is not None:
        raise AgentkitError("give a game file or --description, not both", "drop one of them")
    if not a.name:
        raise AgentkitError("--description needs --name (the game's file stem)", "e.g. --name row_sort")
    engine_cfg = engine_from_args(a)
    claim_output_dir(a.out, "gamerl code2logic", a.force)
    engine = engine_cfg.build()
    try:
        summary = code2logic_from_description(
            engine, a.description, a.name, a.out, a.games, a.drafts, a.instances, a.seed
        )
    finally:
        engine.close()
    print(json.dumps(summary))
    return 0


def _levels(a: argparse.Namespace) -> int:
    """``levels``: the board and analysis sizes by level, as a Markdown table (and JSON with ``--out``)."""
    from pathlib import Path

    from agentkit.errors import AgentkitError, did_you_mean
    from agentkit.files import atomic_write
    from agentkit.gamerl.dataset import level_sizes
    from agentkit.gamerl.games import GAMES

    games = [x for x in a.games.split(",") if x] if a.games else sorted(GAMES.names())
    for g in games:
        if g not in GAMES:
            raise AgentkitError(f"unknown game {g!r}", did_you_mean(g, GAMES.names()))
    sizes = level_sizes(games, a.per_level, a.seed)
    print("| game | board characters E / M / H | analysis characters E / M / H |\n|---|---|---|")
    for g, by_level in sizes.items():
        board = " / ".join(f"{v['board_chars']:.0f}" for v in by_level.values())
        analysis = " / ".join(f"{v['analysis_chars']:.0f}" for v in by_level.values())
        print(f"| {g} | {board} | {analysis} |")
    if a.out:
        record = {"per_level": a.per_level, "seed": a.seed, "games": sizes}
        atomic_write(Path(a.out), json.dumps(record, indent=1) + "\n")
    return 0
