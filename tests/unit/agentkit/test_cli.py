"""The `agentkit` dispatcher: verbs come from the registry (a package adds one by entry point), and every option's
help says it is required or shows its default, 0 and lists included."""

import argparse
from importlib.metadata import EntryPoint

from agentkit import cli, registry
from agentkit.command import COMMANDS, Command


class Greet(Command):
    name, help, description = "greet", "say hello", "Say hello to someone."

    def add_arguments(self, parser):
        parser.add_argument("--to", default="world", help="whom")

    def run(self, args):
        print(f"hello, {args.to}")
        return 0


def test_a_package_adds_a_verb_by_entry_point(monkeypatch, capsys):
    ours = EntryPoint(name="greet", value=f"{__name__}:Greet", group="agentkit.commands")
    real = registry.entry_points
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [*real(group=group), *([ours] if group == ours.group else [])]
    )
    monkeypatch.setattr(COMMANDS, "_loaded_eps", False)
    monkeypatch.setattr(COMMANDS, "_targets", dict(COMMANDS._targets))
    assert cli.main(["greet", "--to", "you"]) == 0
    assert capsys.readouterr().out == "hello, you\n"
    assert "greet" in cli._parser().format_help() and "say hello" in cli._parser().format_help()
    assert {"run", "serve", "bench", "ace", "gamerl"} <= set(COMMANDS.names())  # the built-ins, by the same group


def _options(parser: argparse.ArgumentParser, path: str = "agentkit"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _options(child, f"{path} {name}")
        elif action.option_strings and action.help is not argparse.SUPPRESS and action.dest != "help":
            yield path, action


def test_every_option_is_required_or_shows_its_default():
    checked = 0
    for path, action in _options(cli._parser()):
        where, text = f"{path} {action.option_strings[-1]}", action.help or ""
        if action.required:
            assert text.endswith("(required)") and "(default: none)" not in text, where
        elif action.default is None or action.default is False or isinstance(action, argparse._StoreConstAction):
            continue
        else:
            assert "default: " in text, where
            if action.default == 0 and not isinstance(action.default, bool):
                assert "default: 0" in text or "default: 0.0" in text, where  # 0 is shown, not taken for False
            if isinstance(action.default, (list, tuple)):
                assert "(" not in text.rpartition("default: ")[2][:1], where  # comma-joined, not a tuple's repr
        checked += 1
    assert checked > 80  # options with a default or required, across every command


def test_zero_and_required_as_a_user_reads_them(capsys):
    parser = cli._parser()
    gen = parser._subparsers._group_actions[0].choices["uncertainty"]._subparsers._group_actions[0].choices["generate"]
    text = gen.format_help()
    assert "(default: 0)" in " ".join(text.split()) and "(required)" in text and "default: none" not in text
