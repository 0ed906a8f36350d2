"""The ``agentkit`` command: a dispatcher over the registered verbs (``agentkit.command.COMMANDS``: the built-ins in
``agentkit.commands`` and the method packages, third parties' by entry point). Bad input prints one ``error:`` line
with the fix and exits 2 (``--debug``: traceback)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from agentkit.command import COMMANDS
from agentkit.errors import AgentkitError

EPILOG = """examples:
  agentkit run quickstart                          the embedded model on seeded arithmetic problems
  agentkit run quickstart --preset tiny --set num_problems=8
  agentkit run my_run.yaml --set engine.max_batch_size=32 --output-dir outputs/x
  agentkit run quickstart --resume                 continue the latest run that is not complete
  accelerate launch --config_file configs/accelerate/cpu.yaml -m agentkit run quickstart
  agentkit models list
  agentkit serve --model smollm2-135m --agent tir --tools python --api-key KEY
  agentkit tool-server python --port 8100 --api-key KEY
  agentkit bench engine
  agentkit bench sandbox
  agentkit bench agent
  agentkit bench serve
  agentkit bench structured
  agentkit bench tips-potentials
  agentkit bench rl-step
  agentkit bench ace
  agentkit bench revela
  agentkit bench gamerl-verify
  agentkit uncertainty generate --models smollm2-135m,gemma3-270m --tasks multihop-open:200 --out gens.jsonl
  agentkit uncertainty score gens.jsonl --similarity embedding
  agentkit revela eval debian --retriever DIR       nDCG@10 / Recall@100 / MRR of a retriever (or bm25)
  agentkit ace history playbook.json                every version of an ACE playbook; `ace rollback --to N`
  agentkit gamerl export maze,sokoban --images --out DIR     game questions as an HF dataset (GameQA schema)
  agentkit gamerl code2logic examples/code2logic/nim.py --out DIR    a new game's code → validated tasks
"""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: agentkit serve: argument --port: ... (see `agentkit serve --help`)``,
    exit 2 (argparse prints the whole usage first)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"error: {self.prog}: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser: every registered verb as a sub-command, with the arguments of the one ``argv`` names (all of
    them when ``argv`` is None: ``--help`` listings, tests), so that a verb's own imports happen only when it runs."""
    p = _Parser(
        prog="agentkit",
        description="LLM agents and reasoning training.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    for name in COMMANDS.names():
        cls = COMMANDS.get(name)
        verb = sub.add_parser(name, help=cls.help, description=cls.description, add_help=getattr(cls, "add_help", True))
        if chosen in (None, name):
            cls().add_arguments(verb)
        verb.set_defaults(_command=cls)
    _show_defaults(p)
    return p


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Every option's ``--help`` line ends with ``(required)`` or its default, ``0`` and empty lists included (set
    here once, not on each ``add_argument``); flags (``store_true``) and options without a default say nothing."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _show_defaults(child)
            continue
        if not action.option_strings or action.default is argparse.SUPPRESS or "default:" in (action.help or ""):
            continue
        if action.required:
            shown = "required"
        elif action.default is None or action.default is False or isinstance(action, argparse._StoreConstAction):
            continue
        else:
            shown = f"default: {_shown(action.default)}".replace("%", "%%")
        action.help = f"{action.help} ({shown})" if action.help else shown


def _shown(value: Any) -> str:
    """A default as a user types it: lists and tuples comma-joined (``[]`` when empty)."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "[]"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser(argv).parse_args(argv)
    try:
        return args._command().run(args)
    except KeyboardInterrupt as e:
        print(f"interrupted{f': {e}' if str(e) else ''}", file=sys.stderr)
        return 128 + getattr(e, "signum", 2)  # 130 for Ctrl-C, 143 for SIGTERM
    except BrokenPipeError:  # `agentkit ace show FILE | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except Exception as e:
        if args.debug:
            raise
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2 if isinstance(e, (AgentkitError, OSError)) else 1


def _one_line(e: Exception) -> str:
    """An exception as the CLI's one line: a user error as it is, a file error with its path, anything else
    (a bug, not bad input) with its type and how to see the traceback."""
    if isinstance(e, AgentkitError):
        text = str(e)
    elif isinstance(e, OSError) and e.filename:
        text = f"{e.filename}: {e.strerror or e}"
    elif isinstance(e, OSError):
        text = str(e)
    else:
        text = f"{type(e).__name__}: {e} (unexpected; `agentkit --debug ...` shows the traceback)"
    return " ".join(text.split())


if __name__ == "__main__":
    raise SystemExit(main())
