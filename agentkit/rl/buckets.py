"""Length buckets for the loss's forward pass: each group of trajectories padded only to its own longest.

TRL builds one training batch per step: prompts left-padded to the longest prompt, completions right-padded to
the longest completion, and runs the policy over the whole ``[B, P + T]`` rectangle. Multi-turn trajectories
differ a lot in length (one answer turn vs four turns with tool results), so much of that rectangle is padding
that the backbone still computes (the fused LM head skips it: on Triton devices by itself, on a CPU inside
``compact_fused_head`` below). Here the rows are sorted by completion
length and cut into contiguous groups, each sliced to its own width :math:`p_g + c_g` (its longest prompt and
completion), with the cut that minimises

.. math::

    \\sum_g |g| \\, (p_g + c_g) + h \\cdot (\\text{number of groups})

(:math:`h`: the cost of one more forward pass, in padded tokens) — an exact dynamic programme over the sorted
rows, :math:`O(B^2)`. The results are padded back to ``[B, T]`` in the batch's order, so everything after (the
loss and its normalisation, masks, metrics) is TRL's own.

Only the positions change: a row trimmed of ``k`` left-padding columns sees its tokens at positions shifted by
``-k``. Under rotary embeddings attention depends on position differences only, so the log-probabilities equal
the unbucketed ones up to float rounding (tested to 1e-5 with their gradients); a model with absolute position
embeddings would see other positions for left-padded rows, as it already does across rows in TRL's batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F

# one more forward (and backward) pass costs about this many padded tokens: on a CPU a few dozen tokens' worth of
# per-operator dispatch, on a GPU more (small launches); 128 keeps groups few where the saving is small
FORWARD_COST_TOKENS = 128

LogpsCall = Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor | None]]


def length_buckets(
    prompt_lens: Sequence[int], completion_lens: Sequence[int], forward_cost: int = FORWARD_COST_TOKENS
) -> list[list[int]]:
    """The cheapest cut of the rows into groups (row indices; groups in order of completion length).

    >>> length_buckets([50, 50, 50, 50], [10, 200, 10, 200], forward_cost=1)
    [[0, 2], [1, 3]]
    >>> length_buckets([50, 50, 50, 50], [10, 200, 10, 200], forward_cost=10_000)
    [[0, 2, 1, 3]]
    """
    n = len(prompt_lens)
    order = sorted(range(n), key=lambda i: (completion_lens[i], prompt_lens[i]))
    best = [0] + [float("inf")] * n  # best[j]: the cheapest cut of order[:j]
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        widest_prompt, longest = 0, completion_lens[order[j - 1]]
        for i in range(j - 1, -1, -1):  # the last group is order[i:j]
            widest_prompt = max(widest_prompt, prompt_lens[order[i]])
            cost = best[i] + (j - i) * (widest_prompt + longest) + forward_cost
            if cost < best[j]:
                best[j], start[j] = cost, i
    groups, j = [], n
    while j:
        groups.append(order[start[j] : j])
        j = start[j]
    return groups[::-1]


def bucketed_logps(
    call: LogpsCall,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    forward_cost: int = FORWARD_COST_TOKENS,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``call(input_ids, attention_mask, logits_to_keep) -> (logps, entropies or None)`` (each ``[b, keep]``) run
    per length group; returns the ``[B, logits_to_keep]`` results in the batch's order, 0 past each group's width.

    Args:
        call: the unbucketed computation (TRL's ``_get_per_token_logps_and_entropies`` on the policy).
        input_ids: ``[B, P + T]``: prompts left-padded to P, completions right-padded to T.
        attention_mask: ``[B, P + T]``, 1 on real tokens.
        logits_to_keep: T.
        forward_cost: the cost of one more forward pass, in padded tokens.
    """
    width = logits_to_keep
    prompt_width = input_ids.shape[1] - width
    mask = attention_mask.bool()
    cols = torch.arange(input_ids.shape[1], device=mask.device)
    # a row's prompt starts at its first real prompt column; its completion ends after its last real column
    first = torch.where(mask[:, :prompt_width], cols[:prompt_width], prompt_width).min(dim=1).values
    last = torch.where(mask[:, prompt_width:], cols[:width] + 1, 0).max(dim=1).values
    prompt_lens, completion_lens = (prompt_width - first).tolist(), last.tolist()
    groups = length_buckets(prompt_lens, completion_lens, forward_cost)
    if len(groups) == 1 and max(prompt_lens) == prompt_width and max(completion_lens) == width:
        return call(input_ids, attention_mask, width)  # nothing to trim
    logps, entropies, order = [], [], []
    for rows in groups:
        keep = max(1, max(completion_lens[i] for i in rows))  # 0 would keep every column in TRL's slicing
        p = max(prompt_lens[i] for i in rows)
        index = torch.tensor(rows, device=input_ids.device)
        lp, ent = call(
            input_ids[index, prompt_width - p : prompt_width + keep],
            attention_mask[index, prompt_width - p : prompt_width + keep],
            keep,
        )
        logps.append(F.pad(lp, (0, width - keep)))
        if ent is not None:
            entropies.append(F.pad(ent, (0, width - keep)))
        order += rows
    back = torch.empty(len(order), dtype=torch.long, device=input_ids.device)
    back[torch.tensor(order, device=input_ids.device)] = torch.arange(len(order), device=input_ids.device)
    return torch.cat(logps)[back], (torch.cat(entropies)[back] if entropies else None)


@contextlib.contextmanager
def compact_fused_head() -> Iterator[None]:
    """Within the block, TRL's fused LM head projects only the labelled positions on a CPU too.

    TRL's ``add_fused_lm_head`` scores only the positions with a label on devices with Triton, and every position
    elsewhere (so that XLA devices see one tile shape per batch size and do not recompile). On a CPU that sends the
    prompt and the padding through the vocabulary projection as well, forward and backward: in a multi-turn batch
    about half the head's work, which is itself a large share of a small model's step. The per-token results are
    the same (TRL zeroes the unlabelled positions either way). The switch is TRL's own module-level
    ``_use_triton`` test as ``trl.trainer.utils`` reads it (``tests/unit/agentkit/rl/test_trl_contract.py`` pins
    that line); it is process-wide while the block runs.
    """
    import trl.trainer.utils as trl_utils

    original = trl_utils._use_triton
    trl_utils._use_triton = lambda device: original(device) or device.type == "cpu"
    try:
        yield
    finally:
        trl_utils._use_triton = original
