r"""Seeded sprite videos for LPWM, without a download: 64² clips of 3–6 coloured sprites (square, disc, triangle,
diamond) on a dark gradient, each at its own depth (nearer sprites occlude farther ones), moving at constant speed,
bouncing off the walls and, at random frames, turning by 45–135°: a future that several latent actions explain.

``kind="action"`` is the action-conditioned variant: sprite 0 is an agent whose velocity each frame is the given
action (one of 8 compass directions at the agent's speed, redrawn with probability ``redraw`` a frame, stopped at the
walls); the other sprites bounce without turning, so every change the agent makes is in ``actions``.

>>> v = sprite_videos(2, frames=5, size=32, seed=0)
>>> v["frames"].shape, v["frames"].dtype, v["centres"].shape, v["visible"].shape, v["actions"].shape
((2, 5, 3, 32, 32), dtype('uint8'), (2, 5, 6, 2), (2, 5, 6), (2, 5, 2))
>>> bool((v["count"] >= 3).all() and (v["count"] <= 6).all())
True
"""

from __future__ import annotations

import math

import numpy as np

SHAPES = ("square", "disc", "triangle", "diamond")
MAX_SPRITES = 6
DIRECTIONS = np.array([[math.cos(a), math.sin(a)] for a in np.arange(8) * math.pi / 4])  # the agent's actions


def _mask(shape: str, dx: np.ndarray, dy: np.ndarray, r: float) -> np.ndarray:
    """Coverage in [0, 1] of a sprite of radius ``r`` at pixel offsets ``dx, dy`` (1 px anti-aliased edge)."""
    if shape == "square":
        d = np.maximum(np.abs(dx), np.abs(dy)) - r * 0.85
    elif shape == "disc":
        d = np.hypot(dx, dy) - r
    elif shape == "diamond":
        d = (np.abs(dx) + np.abs(dy)) / math.sqrt(2) - r * 0.8
    else:  # an upward triangle: the max of three half-plane distances
        d = np.maximum.reduce([dy - r * 0.6, -0.866 * dx - 0.5 * dy - r * 0.6, 0.866 * dx - 0.5 * dy - r * 0.6])
    return np.clip(0.5 - d, 0.0, 1.0)


def sprite_videos(
    n: int,
    frames: int = 14,
    size: int = 64,
    sprites: tuple[int, int] = (3, 6),
    turn: float = 0.15,
    kind: str = "turns",
    redraw: float = 0.25,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """``n`` clips: ``frames [n, T, 3, S, S]`` (uint8), the sprites' true ``centres [n, T, 6, 2]`` (pixels, x then
    y; unused slots NaN), ``visible [n, T, 6]`` (at least 30 % of the sprite unoccluded), ``actions
    [n, T, 2]`` (the agent's velocity direction at each frame for ``kind="action"``, else 0), ``count [n]``."""
    if kind not in ("turns", "action"):
        raise ValueError(f"kind: {kind!r} is not 'turns' or 'action'")
    rng = np.random.default_rng(seed)
    out = np.zeros((n, frames, 3, size, size), np.uint8)
    centres = np.full((n, frames, MAX_SPRITES, 2), np.nan, np.float32)
    visible = np.zeros((n, frames, MAX_SPRITES), bool)
    actions = np.zeros((n, frames, 2), np.float32)
    count = rng.integers(sprites[0], sprites[1] + 1, size=n)
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float32)
    scale = size / 64
    for i in range(n):
        k = int(count[i])
        radius = rng.uniform(4.0, 6.0, k) * scale
        shapes = rng.integers(len(SHAPES), size=k)
        hue = rng.permutation(np.linspace(0, 1, 12, endpoint=False))[:k] + rng.uniform(0, 1 / 12, k)
        colours = np.stack([_hsv(h, rng.uniform(0.6, 1.0), rng.uniform(0.75, 1.0)) for h in hue])
        depth_order = rng.permutation(k)  # drawn first = farthest
        pos = rng.uniform(radius[:, None] + 1, size - radius[:, None] - 1, (k, 2))
        speed = rng.uniform(1.5, 3.0, k) * scale
        angle = rng.uniform(0, 2 * math.pi, k)
        vel = np.stack([np.cos(angle), np.sin(angle)], -1) * speed[:, None]
        bg_top, bg_bottom = rng.uniform(0.02, 0.2, 3), rng.uniform(0.02, 0.2, 3)
        background = bg_top[:, None, None] + (bg_bottom - bg_top)[:, None, None] * (ys / (size - 1))[None]
        act = DIRECTIONS[rng.integers(8)]
        for t in range(frames):
            if kind == "action":
                if t > 0 and rng.random() < redraw:
                    act = DIRECTIONS[rng.integers(8)]
                actions[i, t] = act
            img = background.copy()
            cover = np.zeros((k, size, size), np.float32)
            whole = np.zeros(k, np.float32)
            for rank, j in enumerate(depth_order):
                m = _mask(SHAPES[shapes[j]], xs - pos[j, 0], ys - pos[j, 1], radius[j])
                img = img * (1 - m) + colours[j][:, None, None] * m
                cover[depth_order[:rank]] *= 1 - m  # what this sprite hides of the farther ones
                cover[j], whole[j] = m, m.sum()
            visible[i, t, :k] = cover.sum((1, 2)) >= 0.3 * whole
            centres[i, t, :k] = pos
            out[i, t] = np.round(np.clip(img, 0, 1) * 255).astype(np.uint8)
            # move: the agent follows its action (stopped at the walls); the others turn at random and bounce
            for j in range(k):
                if kind == "action" and j == 0:
                    pos[j] = np.clip(pos[j] + act * speed[j], radius[j], size - radius[j])
                    continue
                if kind == "turns" and rng.random() < turn:
                    a = rng.uniform(math.pi / 4, 3 * math.pi / 4) * rng.choice([-1, 1])
                    c, s = math.cos(a), math.sin(a)
                    vel[j] = [c * vel[j, 0] - s * vel[j, 1], s * vel[j, 0] + c * vel[j, 1]]
                pos[j] += vel[j]
                for ax in range(2):
                    if pos[j, ax] < radius[j] or pos[j, ax] > size - radius[j]:
                        vel[j, ax] = -vel[j, ax]
                        pos[j, ax] = np.clip(pos[j, ax], radius[j], size - radius[j])
    return {"frames": out, "centres": centres, "visible": visible, "actions": actions, "count": count}


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    """One HSV colour as RGB in [0, 1]."""
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return np.array([(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i])
