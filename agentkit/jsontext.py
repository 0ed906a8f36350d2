"""Checks on JSON text that need no parse (and so cannot be defeated by what a parse would do to a hostile text).

Python's ``json`` parser recurses once per nesting level: a body nested 100,000 deep raises ``RecursionError``
deep inside it, and so do recursive walks of a schema nested a few hundred levels. ``json_depth`` measures the
nesting first, in linear time and without recursion, so that servers can refuse such text with a 400.
"""

from __future__ import annotations


def json_depth(raw: bytes | str) -> int:
    """How deeply arrays and objects nest in a JSON text (0 for a scalar), read without parsing it, in linear time
    and without recursion: a quote opens or closes a string unless an odd run of backslashes precedes it, and the
    running count of ``[{`` minus ``]}`` outside strings peaks at the depth (a few ms per MB, numpy).

    >>> json_depth(b'{"a": [1, {"b": "]]\\\\"}, "\\\\"["]}')
    3
    """
    import numpy as np

    raw = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    a = np.frombuffer(raw, dtype=np.uint8)
    quotes = np.flatnonzero(a == ord('"'))
    after = (quotes > 0) & (a[quotes - 1] == ord("\\"))
    if after.any():  # a quote after an odd run of backslashes is part of its string
        others = np.flatnonzero(a != ord("\\"))  # the quotes are among them
        escaped = quotes[after]
        run = escaped - 1 - np.concatenate(([-1], others))[np.searchsorted(others, escaped)]
        keep = ~after
        keep[after] = run % 2 == 0
        quotes = quotes[keep]
    step = np.zeros(256, dtype=np.int8)
    step[[ord("["), ord("{")]], step[[ord("]"), ord("}")]] = 1, -1
    brackets = np.flatnonzero(step[a])
    outside = brackets[np.searchsorted(quotes, brackets) % 2 == 0]  # an even number of quotes before it
    return int(np.cumsum(step[a[outside]], dtype=np.int64).max(initial=0))
