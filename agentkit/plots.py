"""The one place matplotlib's backend is chosen."""

from __future__ import annotations


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend: runs write PNG files and often happen on machines without a
    display. Imported on first use, because matplotlib costs ~0.5 s to import and most commands never plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
