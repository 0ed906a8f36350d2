"""PNG renderings of grid games: one drawing routine for every board of coloured cells with glyphs, and PNG bytes
for datasets (GameQA's image variant)."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

CELL = 36
MARGIN = 22
COLORS = {
    "wall": (60, 60, 70),
    "floor": (245, 245, 240),
    "start": (120, 200, 120),
    "goal": (230, 120, 110),
    "box": (200, 150, 80),
    "target": (250, 220, 120),
    "player": (90, 140, 230),
    "alive": (40, 40, 40),
    "dead": (250, 250, 250),
    "black": (30, 30, 30),
    "white": (250, 250, 250),
    "covered": (170, 180, 190),
    "revealed": (235, 235, 235),
    "mine": (220, 60, 60),
    "tree": (70, 150, 70),
    "tent": (240, 170, 60),
    "piece": (120, 90, 200),
    "filled": (110, 110, 130),
    "highlight": (255, 240, 150),
}


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size)
    except TypeError:  # Pillow < 10.1 has no sized default font
        return ImageFont.load_default()


def draw_grid(
    rows: int,
    cols: int,
    cell: Callable[[int, int], tuple[str | tuple[int, int, int], str]],
    title: str | None = None,
    row_labels: Sequence[str] | None = None,
):
    """A board image: ``cell(r, c) -> (colour name or RGB, glyph)`` for every cell, row and column numbers on the
    margins (the text rendering's coordinates; ``row_labels`` when the drawing has rows the text does not), an
    optional title above."""
    from PIL import Image, ImageDraw

    top = MARGIN + (18 if title else 0)
    img = Image.new("RGB", (MARGIN + cols * CELL + 4, top + rows * CELL + 4), "white")
    d = ImageDraw.Draw(img)
    font, small = _font(18), _font(11)
    if title:
        d.text((4, 2), title, fill="black", font=small)
    for c in range(cols):
        d.text((MARGIN + c * CELL + CELL // 2 - 3, top - 14), str(c), fill="gray", font=small)
    for r in range(rows):
        label = str(r) if row_labels is None else row_labels[r]
        d.text((4, top + r * CELL + CELL // 2 - 6), label, fill="gray", font=small)
        for c in range(cols):
            color, glyph = cell(r, c)
            fill = COLORS.get(color, color) if isinstance(color, str) else color
            x, y = MARGIN + c * CELL, top + r * CELL
            d.rectangle([x, y, x + CELL, y + CELL], fill=fill, outline=(150, 150, 150))
            if glyph:
                dark = sum(fill) < 300
                d.text((x + CELL // 2, y + CELL // 2), glyph, fill="white" if dark else "black", font=font, anchor="mm")
    return img


def draw_chars(grid: Sequence[Sequence[Any]], palette: dict[str, tuple[str, str]], title: str | None = None):
    """``draw_grid`` for a grid of symbols: ``palette[symbol] = (colour, glyph)``; unknown symbols are drawn as
    themselves on the floor colour."""
    return draw_grid(
        len(grid), len(grid[0]), lambda r, c: palette.get(str(grid[r][c]), ("floor", str(grid[r][c]))), title
    )


def png_bytes(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
