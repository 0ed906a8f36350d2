"""Small shared networks and helpers for the extras demos (one definition, not one per method)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def mlp(d_in: int, hidden: int, d_out: int, layers: int = 2, act: type[nn.Module] = nn.ELU) -> nn.Sequential:
    """``layers`` hidden layers of ``hidden`` units, each followed by ``act``, then a linear output."""
    dims = [d_in] + [hidden] * layers
    mods: list[nn.Module] = []
    for a, b in zip(dims[:-1], dims[1:]):
        mods += [nn.Linear(a, b), act()]
    return nn.Sequential(*mods, nn.Linear(dims[-1], d_out))


def gaussian(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split an encoder's output ``[..., 2k]`` into (μ, log σ²), each ``[..., k]``, log σ² clamped to [−12, 6]."""
    mu, logvar = h.chunk(2, -1)
    return mu, logvar.clamp(-12, 6)


def kl_std_normal(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(μ, diag σ²) ‖ N(0, I)) per row: ½ Σ (μ² + σ² − 1 − log σ²) over the last axis.

    >>> float(kl_std_normal(torch.ones(1, 3), torch.zeros(1, 3))[0])
    1.5
    """
    return 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(-1)


def vicreg(
    a: torch.Tensor, b: torch.Tensor, sim: float = 25.0, var: float = 25.0, cov: float = 1.0, eps: float = 1e-4
) -> dict[str, torch.Tensor]:
    r"""VICReg (Bardes et al. 2022) on paired embeddings ``a, b [N, D]`` (row i of each: two views of one thing;
    dense SSL passes matched voxels as rows):

    .. math::
        L = \lambda\,\frac1{ND}\sum_i \|a_i - b_i\|^2 + \mu\,[v(a) + v(b)] + \nu\,[c(a) + c(b)],\quad
        v(z) = \frac1D \sum_d \max(0, 1 - \sqrt{\mathrm{Var}(z_d) + \epsilon}),\quad
        c(z) = \frac1D \sum_{d \ne e} \mathrm{Cov}(z)_{de}^2

    with λ, μ, ν = ``sim, var, cov`` (the paper's 25, 25, 1). The invariance term is a mean over the D features
    too, as in the official code (``F.mse_loss``; the paper writes a sum over them). Returns the three terms (``invariance``,
    ``variance``, ``covariance``; each already weighted) and their sum ``loss``.

    >>> z = torch.randn(64, 8)
    >>> float(vicreg(z, z)["invariance"])  # identical views: nothing to pull together
    0.0
    """
    inv = sim * F.mse_loss(a, b)
    n, d = a.shape

    def var_cov(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = z - z.mean(0)
        v = F.relu(1 - torch.sqrt(z.var(0) + eps)).mean()
        c = (z.T @ z) / max(n - 1, 1)
        return v, (c.pow(2).sum() - c.diagonal().pow(2).sum()) / d

    (va, ca), (vb, cb) = var_cov(a), var_cov(b)
    out = {"invariance": inv, "variance": var * (va + vb), "covariance": cov * (ca + cb)}
    out["loss"] = out["invariance"] + out["variance"] + out["covariance"]
    return out


class SmallCNN(nn.Module):
    """conv(c1)–ReLU–pool → conv(c2)–ReLU–pool → fc(hidden)–ReLU → linear head.

    ``features(x)``: the penultimate representation z, ``[B, hidden]``; ``head(z)``: logits ``[B, classes]``.
    Input ``[B, in_ch, size, size]`` (size divisible by 4).
    """

    def __init__(self, in_ch: int = 1, classes: int = 10, c1: int = 16, c2: int = 32, hidden: int = 64, size: int = 28):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_ch, c1, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(c2 * (size // 4) ** 2, hidden),
            nn.ReLU(),
        )
        self.head = nn.Linear(hidden, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class ViT(nn.Module):
    """A plain pre-norm Vision Transformer (timm cannot be imported here: it needs torchvision).

    ``size × size`` images with ``in_ch`` channels are cut into ``patch × patch`` patches, embedded linearly, given
    learned positions and a CLS token, and passed through ``depth`` ``nn.TransformerEncoderLayer`` blocks
    (``heads`` heads, MLP ``4·dim``, GELU, norm first).

    ``tokens(x)``: ``[B, 1 + (size/patch)², dim]`` after the final LayerNorm (CLS first); ``forward(x)``: the CLS
    token through a linear head, ``[B, out]`` (``out=0``: the CLS token itself).

    >>> ViT(1, 16, 4, dim=8, depth=1, heads=2, out=3)(torch.zeros(2, 1, 16, 16)).shape
    torch.Size([2, 3])
    """

    def __init__(self, in_ch: int, size: int, patch: int, dim: int = 64, depth: int = 4, heads: int = 4, out: int = 0):
        super().__init__()
        if size % patch:
            raise ValueError(f"image size {size} must divide by the patch size {patch}")
        self.embed = nn.Conv2d(in_ch, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 1 + (size // patch) ** 2, dim))
        layer = nn.TransformerEncoderLayer(
            dim, heads, 4 * dim, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, out) if out else nn.Identity()

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        z = self.embed(x).flatten(2).transpose(1, 2)
        z = torch.cat([self.cls.expand(len(z), -1, -1), z], 1) + self.pos
        return self.norm(self.blocks(z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.tokens(x)[:, 0])


@torch.no_grad()
def batched(model: nn.Module, x: torch.Tensor, fn=None, batch: int = 2048) -> torch.Tensor:
    """``fn(model, chunk)`` (default: ``model(chunk)``) over ``x`` in chunks of ``batch`` rows, in eval mode and
    without gradients, concatenated; the model's training mode is restored."""
    was = model.training
    model.eval()
    out = torch.cat([fn(model, b) if fn is not None else model(b) for b in x.split(batch)])
    model.train(was)
    return out


def predict(model: nn.Module, x: torch.Tensor, batch: int = 2048) -> torch.Tensor:
    """Predicted labels ``[N]`` in eval mode, in batches (``batched``)."""
    return batched(model, x, lambda m, b: m(b).argmax(1), batch)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Share of ``x`` whose predicted label (``predict``) is ``y``."""
    return (predict(model, x) == y).float().mean().item()


def fit(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    train: tuple[torch.Tensor, torch.Tensor],
    val: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    epochs: int,
    batch_size: int,
    sched=None,
) -> dict:
    """Cross-entropy training in shuffled mini-batches; after each epoch the validation accuracy, and the test
    accuracy of the best validation epoch so far (model selection on validation, never on test).

    Returns ``{"test_accuracy", "val_accuracy", "losses"}`` (every step's loss; non-finite ones as NaN).
    """
    (x, y), losses, best = train, [], (-1.0, 0.0)
    for _ in range(epochs):
        for b in torch.randperm(len(y)).split(batch_size):
            loss = F.cross_entropy(model(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(loss.item() if math.isfinite(loss.item()) else float("nan"))
        acc = accuracy(model, *val)
        if acc > best[0]:
            best = (acc, accuracy(model, *test))
    return {"test_accuracy": best[1], "val_accuracy": best[0], "losses": losses}


def timed(fn: Callable[[], Any], cuda: bool = False) -> tuple[Any, float]:
    """``(fn(), seconds)``: the wall time of one call, the GPU's queue drained before and after when ``cuda`` (so
    the time is the work's, not its launch's).

    >>> out, seconds = timed(lambda: sum(range(1000)))
    >>> out, seconds >= 0
    (499500, True)
    """
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if cuda:
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def warmup_cosine(opt: torch.optim.Optimizer, total: int, warm_frac: float = 0.1):
    """LambdaLR: linear warm-up over ``warm_frac`` of ``total`` steps, then cosine decay to 0 (step per batch)."""
    warm = max(1, int(total * warm_frac))
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: min(1.0, (t + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(t, total) / total))
    )


def flow_pair(x0: torch.Tensor, eps: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Flow matching's linear path (SiT, rectified flow): the point :math:`x_t = (1 - t)\,x_0 + t\,\varepsilon` and
    its velocity target :math:`v^\star = dx_t/dt = \varepsilon - x_0` (``t [B]`` broadcast over the other axes);
    the network regresses :math:`v^\star` with MSE and ``euler_sample`` integrates it back from noise."""
    t = t.view(-1, *([1] * (x0.dim() - 1)))
    return (1 - t) * x0 + t * eps, eps - x0


def time_features(t: torch.Tensor, dim: int) -> torch.Tensor:
    """DiT's sinusoidal features of flow times ``t [B]`` in [0, 1]: ``[cos(1000 t ω_k), sin(1000 t ω_k)]`` with
    ω_k = 10000^(−k/(dim/2)), ``[B, dim]`` (a time MLP maps them to the conditioning vector).

    >>> time_features(torch.zeros(2), 4)
    tensor([[1., 1., 0., 0.],
            [1., 1., 0., 0.]])
    """
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
    a = 1000 * t[:, None] * freqs[None]
    return torch.cat([a.cos(), a.sin()], -1)


def psnr_each(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """``[B]``: the PSNR (dB) of each item of ``x [B, …]`` against ``ref``, both in [0, 1] (MSE floored at 1e-10,
    so identical items score 100 dB).

    >>> psnr_each(torch.full((2, 4), 0.5), torch.tensor([[0.6] * 4, [0.5] * 4])).round().tolist()  # MSE 0.01, 0
    [20.0, 100.0]
    """
    mse = (x - ref).pow(2).flatten(1).mean(1).clamp(min=1e-10)
    return 10 * torch.log10(1 / mse)


def psnr(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Mean over the first axis of ``psnr_each``.

    >>> round(psnr(torch.full((2, 4), 0.5), torch.full((2, 4), 0.6)), 3)  # MSE 0.01
    20.0
    """
    return float(psnr_each(x, ref).mean())


@torch.no_grad()
def euler_sample(model: nn.Module, noise: torch.Tensor, steps: int) -> torch.Tensor:
    """Integrate ``dx/dt = model(x, t)`` from ``t = 1`` (noise) to 0 in ``steps`` equal Euler steps."""
    x = noise
    ts = torch.linspace(1, 0, steps + 1)
    for a, b in zip(ts[:-1], ts[1:]):
        x = x + (b - a) * model(x, a.expand(len(x)))
    return x


def linear_probe(
    z: torch.Tensor,
    y: torch.Tensor,
    train,
    val,
    test,
    cs: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0),
    max_iter: int = 2000,
) -> dict[str, float]:
    """Logistic regression on frozen embeddings ``z [N, d]`` (standardised on the training rows), its inverse
    regularisation C picked on the validation rows; returns ``{"val_accuracy", "test_accuracy", "C"}``.
    ``max_iter`` caps L-BFGS's iterations (thousands of wide features converge slowly at large C)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    x, y = z.detach().cpu().double().numpy(), y.cpu().numpy()
    scaler = StandardScaler().fit(x[train])
    x = scaler.transform(x)
    best = {"val_accuracy": -1.0}
    for c in cs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            lr = LogisticRegression(C=c, max_iter=max_iter).fit(x[train], y[train])
        score = lr.score(x[val], y[val])
        if score > best["val_accuracy"]:
            best = {"val_accuracy": score, "test_accuracy": lr.score(x[test], y[test]), "C": c}
    return best


class GCN(nn.Module):
    """``layers`` PyG ``GCNConv`` layers (ReLU and dropout between them): Z = Â σ(… σ(Â X W₁) …) W_L, with
    Â = D̃^-½ (A + I) D̃^-½. ``edge_weight`` (optional, ``[E]``) weights the edges of A."""

    def __init__(self, d_in: int, hidden: int, d_out: int, layers: int = 2, dropout: float = 0.5):
        from torch_geometric.nn import GCNConv

        super().__init__()
        dims = [d_in] + [hidden] * (layers - 1) + [d_out]
        self.convs = nn.ModuleList(GCNConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor | None = None):
        for i, conv in enumerate(self.convs):
            x = conv(F.dropout(x, self.dropout, self.training), edge_index, edge_weight)
            if i < len(self.convs) - 1:
                x = F.relu(x)
        return x
