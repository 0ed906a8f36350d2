"""`agentkit --help` of every command: each option says it is required or shows its default, 0 and lists included."""

import argparse

from agentkit import cli


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
        elif action.default is None or action.default is False:  # flags, and options that default to nothing
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
