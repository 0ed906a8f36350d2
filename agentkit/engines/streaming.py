"""Incremental text of sequences being generated, for streaming responses."""

from __future__ import annotations

from collections.abc import Callable

TextCallback = Callable[[int, int, str], None]  # (prompt index, sample index, text delta)


class DeltaStream:
    """Turns each sequence's growing tokens into text deltas that will not be taken back.

    Text is held back while it could be the start of a stop string (the last ``max stop length - 1``
    characters) or ends in an incomplete UTF-8 character; ``finish`` sends the rest of the final text.
    """

    def __init__(self, tokenizer, callback: TextCallback, stop: list[str]):
        self.tokenizer, self.callback = tokenizer, callback
        self.hold = max((len(s) for s in stop if s), default=1) - 1
        self.sent: dict[tuple[int, int], int] = {}

    def step(self, key: tuple[int, int], tokens: list[int]) -> None:
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        if text.endswith("\ufffd"):
            return
        self._send(key, text, len(text) - self.hold)

    def finish(self, key: tuple[int, int], text: str) -> None:
        self._send(key, text, len(text))

    def _send(self, key: tuple[int, int], text: str, upto: int) -> None:
        done = self.sent.get(key, 0)
        if upto > done:
            self.callback(key[0], key[1], text[done:upto])
            self.sent[key] = upto
