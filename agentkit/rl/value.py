r"""Critics for PPO and its value loss.

A critic maps a token sequence to a value per position. V_t, the value of the state a completion token t is
drawn from, is read at the position before it, like the logits that score it: for a completion of T tokens at the
end of a sequence, ``values[:, -T - 1 : -1]`` (``completion_values``). Two critics:

- ``ValueHead`` on the policy: a linear map of the policy's last hidden state, so the policy's backbone (its full
  weights, or its LoRA adapters) learns from the value loss too (the shared-backbone critic of OpenRLHF's and the
  original TRL PPO's ``AutoModelForCausalLMWithValueHead``);
- ``ValueModel``: a separate backbone with its own head (TRL's ``PPOTrainer``: ``value_model``), by default a copy
  of the policy's backbone at the start of training.

Heads start at zero, so the first advantages are the returns to go.

PPO's clipped value loss (Schulman et al. 2017; TRL's ``PPOTrainer``), over model tokens t with value targets
:math:`\hat R_t` and the values :math:`V^{old}_t` the advantages were computed with:

.. math::
    L_V = \tfrac12\,\operatorname{mean}_t \max\big((V_t - \hat R_t)^2,\;
          (V^{old}_t + \operatorname{clip}(V_t - V^{old}_t, -\epsilon_V, \epsilon_V) - \hat R_t)^2\big)
"""

from __future__ import annotations

import copy

import torch
from torch import nn


class ValueHead(nn.Module):
    """A scalar value per position from hidden states ``[B, L, H]`` -> ``[B, L]``; zero-initialised.

    Examples:
        >>> head = ValueHead(4)
        >>> head(torch.ones(2, 3, 4)).shape, float(head(torch.ones(1, 1, 4)))
        (torch.Size([2, 3]), 0.0)
    """

    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.to(self.linear.weight.dtype)).squeeze(-1)


def backbone_of(model) -> nn.Module:
    """The decoder of a causal LM (a PEFT model's too): the module whose ``last_hidden_state`` the LM head reads."""
    if hasattr(model, "get_base_model"):  # PEFT
        model = model.get_base_model()
    return model.base_model


def hidden_size(model) -> int:
    return model.config.get_text_config().hidden_size


class ValueModel(nn.Module):
    """A separate critic: a causal LM's backbone (its decoder, without the LM head) and a ``ValueHead``.

    Args:
        backbone: the decoder (e.g. ``backbone_of(policy)``, copied: see ``from_policy``).
        hidden: its hidden size.
    """

    def __init__(self, backbone: nn.Module, hidden: int):
        super().__init__()
        self.backbone, self.head = backbone, ValueHead(hidden)

    @classmethod
    def from_policy(cls, policy) -> ValueModel:
        """A critic initialised from a copy of the policy's backbone (before any adapter is added to it)."""
        backbone = copy.deepcopy(backbone_of(policy))
        for p in backbone.parameters():
            p.requires_grad_(True)
        return cls(backbone.train(), hidden_size(policy))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``[B, L]`` values, one per position."""
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return self.head(out.last_hidden_state)


def completion_values(values: torch.Tensor, width: int) -> torch.Tensor:
    """The values of the states the last ``width`` tokens are drawn from: positions ``-width - 1 .. -2``.

    Examples:
        >>> completion_values(torch.arange(6.0).view(1, 6), 2).tolist()
        [[3.0, 4.0]]
    """
    return values[:, -width - 1 : -1]


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped value loss (the module docstring) as a masked mean, and the share of tokens where the clipped
    term was the larger (TRL's ``vf_clipfrac``).

    Args:
        values: ``[B, T]`` the critic's values now.
        old_values: ``[B, T]`` the values the advantages were computed with.
        returns: ``[B, T]`` the value targets R̂.
        mask: ``[B, T]`` 1 on model tokens.
        clip: ε_V.

    Returns:
        (loss, clip fraction).

    Examples:
        >>> one = torch.ones(1, 2)
        >>> loss, frac = clipped_value_loss(torch.tensor([[2.0, 0.5]]), 0 * one, one, one, clip=0.2)
        >>> round(float(loss), 4), float(frac)  # token 1: max(1, 0.64); token 2: max(0.25, 0.64)
        (0.41, 0.5)
    """
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    plain, capped = (values - returns) ** 2, (clipped - returns) ** 2
    n = mask.sum().clamp(min=1.0)
    loss = 0.5 * (torch.maximum(plain, capped) * mask).sum() / n
    frac = ((capped > plain).float() * mask).sum() / n
    return loss, frac.detach()


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, total: tuple[float, float, float] | None = None) -> torch.Tensor:
    """``(x − mean) / std`` over the masked entries (0 elsewhere), the mean kept out of nothing: TRL's PPO whitens
    its advantages so. ``total``: (Σx, Σx², n) over a larger batch (e.g. all processes) to whiten by instead.

    Examples:
        >>> masked_whiten(torch.tensor([[1.0, 3.0, 9.0]]), torch.tensor([[1.0, 1.0, 0.0]])).tolist()
        [[-1.0, 1.0, 0.0]]
    """
    s, s2, n = total if total is not None else (float((x * mask).sum()), float((x * x * mask).sum()), float(mask.sum()))
    mean = s / max(n, 1.0)
    var = max(s2 / max(n, 1.0) - mean * mean, 0.0)
    return (x - mean) / (var**0.5 + 1e-8) * mask
