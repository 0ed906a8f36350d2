"""argparse types shared by every command module: numbers within bounds, each failure one line naming the rule
(``agentkit.cli`` prints it and exits 2)."""

from __future__ import annotations

import argparse


def number(tp: type, low: float | None = None, high: float | None = None, open_low: bool = False):
    """An argparse type: ``tp`` within [low, high] (``open_low``: > low)."""

    def parse(text: str):
        try:
            value = tp(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if tp is int else 'a number'}, got {text!r}"
            ) from None
        if low is not None and (value <= low if open_low else value < low):
            raise argparse.ArgumentTypeError(f"must be {'>' if open_low else '>='} {low:g}, got {text}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high:g}, got {text}")
        return value

    parse.__name__ = tp.__name__
    return parse


POS_INT, NONNEG_INT, PORT = number(int, 1), number(int, 0), number(int, 1, 65535)
POS_FLOAT, NONNEG_FLOAT, TOP_P = number(float, 0, open_low=True), number(float, 0), number(float, 0, 1, True)
