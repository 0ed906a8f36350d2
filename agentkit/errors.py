"""User-facing errors: one line naming the problem and the fix; the CLI exits 2 on them."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AgentkitError(Exception):
    """An error caused by the user's input (name, file, config), not by a bug.

    ``hint`` says what to do about it; the CLI prints ``error: <message> (<hint>)`` and exits 2.
    """

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"did you mean 'x'?"`` for the closest choice, else the list of choices.

    >>> did_you_mean("quikstart", ["quickstart", "tiny"])
    "did you mean 'quickstart'?"
    """
    choices = sorted(choices)
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    if close:
        return f"did you mean {close[0]!r}?"
    return "choose one of: " + ", ".join(choices) if choices else "none are available"
