"""``agentkit <verb>``'s building blocks: the ``Command`` class every verb is, the ``COMMANDS`` registry (entry-point
group ``agentkit.commands``, so a package can add ``agentkit <its verb>``), and the options several commands share,
declared once.

A command is a class with ``name``, ``help`` (one line for ``agentkit --help``), ``description`` (its own
``--help``), ``add_arguments(parser)`` and ``run(args) -> exit code``. Its module is imported to list it, so it
imports what it needs to run inside ``run``. Bad input raises ``AgentkitError``: the CLI prints one line and exits 2.

>>> class Hello(Command):
...     name, help = "hello", "say hello"
...     def add_arguments(self, parser):
...         parser.add_argument("--to", default="world", help="whom")
...     def run(self, args):
...         print(f"hello, {args.to}")
...         return 0
>>> COMMANDS.register("hello", "agentkit.command:Hello")  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, ClassVar

from agentkit.argtypes import PORT
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.registry import Registry


class Command:
    """One verb of the ``agentkit`` command."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    description: ClassVar[str | None] = None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the verb's arguments.

        Args:
            parser: the verb's parser (its ``--help`` lists them with their defaults).
        """

    def run(self, args: argparse.Namespace) -> int:
        """Do the work.

        Args:
            args: the parsed arguments.

        Returns:
            The exit code.
        """
        raise NotImplementedError


COMMANDS: Registry[type[Command]] = Registry("command", group="agentkit.commands")


def add_model_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    """``--model``: a catalog name, directory or hub id (``what`` says which model, when there are several)."""
    parser.add_argument(
        "--model", default=DEFAULT_CHAT_MODEL, help=f"{what + ': ' if what else ''}catalog name, directory or hub id"
    )


def add_engine_options(parser: argparse.ArgumentParser, what: str = "", **shortcuts: str) -> None:
    """``--engine KIND``, ``--model`` and ``--engine-option KEY=VALUE``: how a command names its engine (the
    kind's ``EngineConfig``; ``engine_from_args`` builds it). ``shortcuts`` maps extra flags to the option each
    sets (``upstream="base_url"``: ``--upstream URL``)."""
    from agentkit.engines import ENGINES

    add_model_option(parser, what)
    parser.add_argument(
        "--engine",
        default="hf",
        choices=ENGINES.names(),
        help="hf: the embedded transformers engine; vllm: vLLM in this process (make setup-vllm); openai: another "
        "OpenAI-compatible server runs the model; others: installed plugins",
    )
    parser.add_argument(
        "--engine-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the engine kind's config, repeatable, e.g. max_batch_size=8 (hf), base_url=URL (openai); "
        "`agentkit run quickstart --set engine.kind=KIND --help` lists a kind's options",
    )
    for flag, option in shortcuts.items():
        parser.add_argument("--" + flag.replace("_", "-"), help=f"{option} of the engine (--engine-option {option}=…)")
    parser.set_defaults(_engine_shortcuts=shortcuts)


def engine_from_args(args: argparse.Namespace, **defaults: Any):
    """The ``EngineConfig`` that ``add_engine_options``' flags name (``defaults``: options the command sets unless
    the user did), checked before anything loads."""
    from agentkit.config import build_config, parse_sets
    from agentkit.engines import ENGINES

    layer = parse_sets(args.engine_option, flag="--engine-option")
    for flag, option in getattr(args, "_engine_shortcuts", {}).items():
        if getattr(args, flag) is not None:
            layer[option] = getattr(args, flag)
    return build_config(ENGINES.get(args.engine), {**defaults, "model": args.model}, layer)


def add_out_option(parser: argparse.ArgumentParser) -> None:
    """``--out``: where a benchmark also writes its results as JSON."""
    parser.add_argument("--out", help="also write the results as JSON here")


def add_server_options(parser: argparse.ArgumentParser, port: int) -> None:
    """``--host``, ``--port`` and ``--api-key`` of a server command."""
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (loopback unless you say otherwise)")
    parser.add_argument("--port", type=PORT, default=port, help="TCP port")
    parser.add_argument("--api-key", default=None, help="required bearer key (default: $AGENTKIT_API_KEY, else none)")


def server_key(args: argparse.Namespace) -> str | None:
    """The API key a server command runs with (``--api-key``, else ``$AGENTKIT_API_KEY``); a warning when it binds
    beyond loopback without one."""
    key = args.api_key or os.environ.get("AGENTKIT_API_KEY")
    if args.host not in ("127.0.0.1", "localhost", "::1") and not key:
        print(f"warning: serving on {args.host} without an API key", file=sys.stderr)
    return key


def int_list(text: str) -> list[int]:
    """An argparse type: comma-separated positive integers (``1,8,32``)."""
    from agentkit.argtypes import POS_INT

    return [POS_INT(part.strip()) for part in text.split(",")]


int_list.__name__ = "list of positive integers"
