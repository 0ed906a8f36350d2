"""The classifiers GDPD distils between, and the four training objectives it is compared with.

Teacher and student are the same LSTM: its last hidden state h_T is the feature z, a linear head gives the logits.
The teacher reads whole series; the student reads the first p % of each. With CE the cross-entropy on the labels,
the student's objectives are

- **student alone**: CE(head_s(z_s), y);
- **logit KD** (Hinton et al.): CE + λ τ² KL(softmax(u_t/τ) ‖ softmax(u_s/τ)), u the logits on the full and the
  prefix series;
- **FitNets** (Romero et al.): CE + λ ‖W z_s − z_t‖² with a learned linear regressor W;
- **GDPD** [unverified]: CE + λ CE(head_t(ẑ_long), y), ẑ_long drawn by the teacher-feature prior from
  z_T = α ⊙ W z_s + (1 − α) ⊙ ε (``diffusion.sample_from``; features standardised with the teacher's training
  statistics, W as in FitNets, α = sigmoid of a learned vector).

λ = 0 makes every one of them the student alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras.timeseries.gdpd.diffusion import Denoiser, Schedule, sample_from


class LSTMClassifier(nn.Module):
    """An LSTM over ``x [B, channels, length]`` (time on the last axis); ``features`` is the last hidden state."""

    def __init__(self, channels: int, classes: int, hidden: int = 64, layers: int = 1):
        super().__init__()
        self.lstm = nn.LSTM(channels, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x.transpose(1, 2))[1][0][-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Distiller(nn.Module):
    """A student and what its objective adds: the regressor W (FitNets, GDPD) and the chain's mix α (GDPD).

    ``teacher_feats``/``teacher_logits`` are the frozen teacher's outputs on the full series of the same batch;
    ``stats`` the teacher features' training mean and std; ``prior`` the frozen ε_θ over standardised teacher
    features."""

    def __init__(
        self,
        student: LSTMClassifier,
        method: str,
        weight: float,
        teacher_head: nn.Module | None = None,
        prior: Denoiser | None = None,
        schedule: Schedule | None = None,
        stats=None,
        tau: float = 4.0,
    ):
        super().__init__()
        self.student, self.method, self.weight, self.tau = student, method, weight, tau
        hidden = student.head.in_features
        if method in ("fitnets", "gdpd"):
            self.regressor = nn.Linear(hidden, teacher_head.in_features if teacher_head is not None else hidden)
        if method == "gdpd":
            self.mix = nn.Parameter(torch.zeros(teacher_head.in_features))  # α = sigmoid(0) = ½ at the start
            self.teacher_head, self.prior, self.schedule, self.stats = teacher_head, prior, schedule, stats

    def loss(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        teacher_feats: torch.Tensor | None = None,
        teacher_logits: torch.Tensor | None = None,
    ) -> torch.Tensor:
        z = self.student.features(x)
        loss = F.cross_entropy(self.student.head(z), y)
        if self.weight == 0 or self.method == "student":
            return loss
        if self.method == "kd":
            t = self.tau
            kl = F.kl_div(
                F.log_softmax(self.student.head(z) / t, -1),
                F.log_softmax(teacher_logits / t, -1),
                log_target=True,
                reduction="batchmean",
            )
            return loss + self.weight * t * t * kl
        if self.method == "fitnets":
            return loss + self.weight * ((self.regressor(z) - teacher_feats) ** 2).sum(-1).mean()
        mean, std = self.stats
        short = (self.regressor(z) - mean) / std
        alpha = torch.sigmoid(self.mix)
        z_long = sample_from(self.prior, self.schedule, alpha * short + (1 - alpha) * torch.randn_like(short))
        return loss + self.weight * F.cross_entropy(self.teacher_head(z_long * std + mean), y)
