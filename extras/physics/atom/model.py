r"""ATOM (a graph-free, quasi-equivariant transformer neural operator for molecular dynamics) and the baselines it
is compared with: EGNO (Xu et al. 2024, equivariant graph neural operator), an autoregressive EGNN (Satorras et al.
2021) and constant velocity.

Every model maps the present of one molecule, positions ``x [B, N, 3]`` (Å) and velocities ``v [B, N, 3]`` (Å/fs),
with atomic numbers ``z [N]``, to its positions at ``times [P]`` fs ahead, ``[B, P, N, 3]``.

**ATOM** (arXiv 2510.05482; read against the authors' code, ``luke-a-thompson/ATOM``). Per atom, an e3nn lift
embeds the centred position ``(x̃, |x̃|)``, the velocity ``(ṽ, |ṽ|)`` and ``(ṽ, |ṽ|, Z)`` into ``d`` features typed
as irreps ``⌊d/3⌋×1o + (d − 3⌊d/3⌋)×0e``; a tensor product of the position and velocity–Z lifts gives the "Z"
stream. The lifts are repeated over the P output frames, so the sequence is P·N tokens and every atom attends to
every atom at every frame (no graph). Each block's attention is heterogeneous and temporal:

.. math::
    \mathrm{Attn}(S) = W_o \sum_{F \in \{X, V, Z\}} \gamma_F\,
        \mathrm{softmax}\!\Big(\frac{\mathrm{R}_{\theta}(Q Z)\,\mathrm{R}_{\theta}(K F)^\top}{d_h}\Big)\, V F,
    \qquad \theta_i(t_p) = \omega_i\,\frac{t_p - t_0}{\tau},\ \omega_i = b^{-2i/d_h}

with ``γ = softmax(g)`` over the three feature types, shared K and V projections, queries from the Z stream, the
X stream carried as the residual (``S ← S + Attn(S); S ← S + MLP(S)``, pre-norm), and T-RoPE ``R_θ`` rotating
query and key channel pairs by the time of their frame, so a score depends only on the time between the two
frames. The official code divides the logits by ``d_h`` (not its square root); so does this. An e3nn linear map
takes the final features to one 1o vector per token, added to the present position. Only the lift and that final
map are equivariant; the LayerNorms, MLPs and attention treat the irreps' components as plain features, so the
whole model is quasi-equivariant (the rotation error is measured, not zero) and is trained with random rotations.

**EGNO**: an EGNN layer (with velocities) per output frame, each preceded by a Fourier convolution over the P
frames, of the invariant features (``h ← h + σ(K_h * h)``) and of the centred positions and velocities stacked as
two vector channels (``[x̃, ṽ] ← [x̃, ṽ] + K_x * [x̃, ṽ]``, complex weights that only mix the two channels per mode,
so rotations commute with it); frames are told apart by a sinusoidal embedding of ``t_p − t_0``. Edges: all atom
pairs, with the covalent bond and the present squared distance as edge features.

**EGNN (autoregressive)**: the same layers on one frame, Δ (the step, fs) as a node feature, predicting the
positions and velocities one step ahead; rolled out P steps at test.

>>> x, v, z = torch.randn(2, 5, 3), 0.05 * torch.randn(2, 5, 3), torch.tensor([6, 6, 8, 1, 1])
>>> ATOM(dim=24, blocks=1, heads=2)(x, v, z, torch.arange(1.0, 4.0)).shape
torch.Size([2, 3, 5, 3])
>>> bonds = torch.zeros(5, 5)
>>> EGNO(hidden=16, layers=2, frames=3)(x, v, z, torch.arange(1.0, 4.0), bonds).shape
torch.Size([2, 3, 5, 3])
>>> EGNN(hidden=16, layers=2).rollout(x, v, z, 2.0, 3, bonds).shape
torch.Size([2, 3, 5, 3])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras.nets import time_features

V_SCALE = 10.0  # velocities enter the networks in Å per 10 fs (thermal speeds: ~0.01–0.1 Å/fs)


# ---- T-RoPE ---------------------------------------------------------------------------------------------------------
def trope(u: torch.Tensor, t: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    r"""Rotate channel pairs ``(u_{2i}, u_{2i+1})`` of ``u [..., S, d_h]`` by ``θ_i = ω_i · t_s`` (``t [S]``: each
    token's time, already divided by τ). ``⟨R_{θ(a)} q, R_{θ(b)} k⟩`` depends on ``a − b`` only:

    >>> q, k, om = torch.randn(1, 4), torch.randn(1, 4), torch.tensor([1.0, 0.1])
    >>> one = (trope(q, torch.tensor([3.0]), om) * trope(k, torch.tensor([1.0]), om)).sum()
    >>> two = (trope(q, torch.tensor([7.0]), om) * trope(k, torch.tensor([5.0]), om)).sum()
    >>> bool(torch.isclose(one, two, atol=1e-6))
    True
    """
    a = t[:, None] * omega[None]
    cos, sin = a.cos(), a.sin()
    u1, u2 = u[..., 0::2], u[..., 1::2]
    return torch.stack([u1 * cos - u2 * sin, u1 * sin + u2 * cos], -1).flatten(-2)


def lift_irreps(dim: int) -> str:
    """ATOM's feature irreps for width ``dim``: as many 1o vectors as fit, the rest scalars.

    >>> lift_irreps(64), lift_irreps(48)
    ('21x1o + 1x0e', '16x1o')
    """
    vec, sca = dim // 3, dim - 3 * (dim // 3)
    return f"{vec}x1o" + (f" + {sca}x0e" if sca else "")


class ATOMBlock(nn.Module):
    """One ATOM block: heterogeneous temporal attention (queries from Z; keys and values from the X stream, V and
    Z, gated by γ) and an MLP, each pre-normed and residual on the X stream."""

    def __init__(self, dim: int, heads: int, omega: torch.Tensor):
        super().__init__()
        self.heads, self.dh = heads, dim // heads
        self.norm, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.gate = nn.Parameter(0.1 * torch.randn(3))
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.register_buffer("omega", omega, persistent=False)

    def _split(self, u: torch.Tensor) -> torch.Tensor:  # [B, S, d] → [B, H, S, dh]
        return u.view(*u.shape[:2], self.heads, self.dh).transpose(1, 2)

    def forward(self, s: torch.Tensor, hv: torch.Tensor, hz: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``s`` (the X stream) ``[B, P, N, d]``; ``hv, hz`` ``[B, N, d]`` (the same at every frame); ``t [P]`` the
        frames' times over τ."""
        b, p, n, d = s.shape
        tt = t.repeat_interleave(n)  # token (frame p, atom i) → t_p
        q = trope(self._split(self.q(hz).unsqueeze(1).expand(b, p, n, d).reshape(b, p * n, d)), tt, self.omega)
        gates = torch.softmax(self.gate, 0)
        out = 0.0
        for g, f in zip(gates, (s, hv.unsqueeze(1).expand(b, p, n, d), hz.unsqueeze(1).expand(b, p, n, d))):
            f = self.norm(f).reshape(b, p * n, d)
            k = trope(self._split(self.k(f)), tt, self.omega)
            att = torch.softmax(q @ k.transpose(-1, -2) / self.dh, -1)
            out = out + g * (att @ self._split(self.v(f)))
        s = s + self.o(out.transpose(1, 2).reshape(b, p, n, d))
        return s + self.mlp(self.norm2(s))


class ATOM(nn.Module):
    """ATOM: an e3nn lift, ``blocks`` heterogeneous temporal attention blocks over all atoms × frames, an e3nn
    projection to one displacement per atom and frame. ``tau`` (fs): the time unit of T-RoPE's angle;
    ``rope_base``: b in ω_i = b^(−2i/d_h) (the official 1000)."""

    def __init__(self, dim: int = 64, blocks: int = 3, heads: int = 4, tau: float = 1.0, rope_base: float = 1000.0):
        super().__init__()
        from e3nn import o3

        if (dim // heads) % 2:
            raise ValueError(f"dim / heads = {dim // heads} must be even (T-RoPE rotates channel pairs)")
        irreps = lift_irreps(dim)
        self.lift_x = o3.Linear("1x1o + 1x0e", irreps)
        self.lift_v = o3.Linear("1x1o + 1x0e", irreps)
        self.lift_vz = o3.Linear("1x1o + 2x0e", irreps)
        self.lift_z = o3.FullyConnectedTensorProduct(irreps, irreps, irreps)
        dh = dim // heads
        omega = rope_base ** (-2 * torch.arange(dh // 2, dtype=torch.float32) / dh)
        self.blocks = nn.ModuleList(ATOMBlock(dim, heads, omega) for _ in range(blocks))
        self.proj = o3.Linear(irreps, "1x1o")
        self.tau = tau

    def lift(self, x: torch.Tensor, v: torch.Tensor, z: torch.Tensor):
        """The e3nn lift: ``(h_x, h_v, h_z)``, each ``[B, N, d]``, equivariant in x and v."""
        xc = x - x.mean(1, keepdim=True)
        vs = v * V_SCALE
        zz = (z.to(x.dtype) / 10).expand(*x.shape[:2]).unsqueeze(-1)
        hx = self.lift_x(torch.cat([xc, xc.norm(dim=-1, keepdim=True)], -1))
        vn = torch.cat([vs, vs.norm(dim=-1, keepdim=True)], -1)
        hv = self.lift_v(vn)
        hz = self.lift_z(hx, self.lift_vz(torch.cat([vn, zz], -1)))
        return hx, hv, hz

    def forward(self, x: torch.Tensor, v: torch.Tensor, z: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        hx, hv, hz = self.lift(x, v, z)
        s = hx.unsqueeze(1).expand(-1, len(times), -1, -1)
        t = times.to(x) / self.tau
        for blk in self.blocks:
            s = blk(s, hv, hz, t)
        return x.unsqueeze(1) + self.proj(s)


# ---- EGNN and EGNO ----------------------------------------------------------------------------------------------------
class EGCL(nn.Module):
    r"""An E(n)-equivariant layer with velocities (Satorras et al. 2021, eq. 7), dense over one molecule's atoms:

    .. math::
        m_{ij} = \phi_e(h_i, h_j, \|x_i - x_j\|^2, e_{ij}),\quad
        v_i' = \phi_v(h_i)\, v_i + \frac{1}{N-1}\sum_{j \ne i} (x_i - x_j)\,\phi_x(m_{ij}),\quad
        x_i' = x_i + v_i',\quad h_i' = h_i + \phi_h(h_i, \textstyle\sum_j m_{ij})

    Shapes: ``x, v [B, N, 3]``, ``h [B, N, H]``, ``e [N, N, E]``.
    """

    def __init__(self, hidden: int, edge_dim: int = 2):
        super().__init__()
        self.phi_e = nn.Sequential(
            nn.Linear(2 * hidden + 1 + edge_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU()
        )
        self.phi_x = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1, bias=False))
        nn.init.xavier_uniform_(self.phi_x[-1].weight, gain=0.001)
        self.phi_v = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))
        self.phi_h = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))

    def messages(self, x: torch.Tensor, h: torch.Tensor, e: torch.Tensor):
        """``(x_i − x_j [B, N, N, 3], m_ij [B, N, N, H])``, self-pairs zeroed."""
        b, n, _ = x.shape
        rel = x[:, :, None] - x[:, None]
        d2 = rel.pow(2).sum(-1, keepdim=True)
        hh = torch.cat([h[:, :, None].expand(b, n, n, -1), h[:, None].expand(b, n, n, -1)], -1)
        m = self.phi_e(torch.cat([hh, d2, e.expand(b, n, n, -1)], -1))
        return rel, m * (1 - torch.eye(n, device=x.device))[None, :, :, None]

    def forward(self, x: torch.Tensor, v: torch.Tensor, h: torch.Tensor, e: torch.Tensor):
        rel, m = self.messages(x, h, e)
        v = self.phi_v(h) * v + (rel * self.phi_x(m)).sum(2) / max(x.shape[1] - 1, 1)
        return x + v, v, h + self.phi_h(torch.cat([h, m.sum(2)], -1))


def edge_features(x: torch.Tensor, bonds: torch.Tensor) -> torch.Tensor:
    """The EGNN edge features of each sample of ``x [B, N, 3]``: the covalent bond (``bonds [N, N]``) and the
    squared distance, ``[B, N, N, 2]``."""
    d2 = (x[:, :, None] - x[:, None]).pow(2).sum(-1)
    return torch.stack([bonds.to(x).expand_as(d2), d2], -1)


class EGNN(nn.Module):
    """The autoregressive baseline: ``layers`` EGCLs over one frame with Δ (fs) as a node feature, then an
    equivariant velocity read-out; ``step`` predicts (x, v) Δ later, ``rollout`` chains ``steps`` of them."""

    def __init__(self, hidden: int = 64, layers: int = 4):
        super().__init__()
        self.embed = nn.Linear(3, hidden)
        self.layers = nn.ModuleList(EGCL(hidden) for _ in range(layers))
        self.out = EGCL(hidden)

    def step(self, x, v, z, dt: float, e):
        b, n, _ = x.shape
        s = torch.stack(
            [(z.to(x) / 10).expand(b, n), (v * V_SCALE).norm(dim=-1), torch.full((b, n), dt / 10).to(x)], -1
        )
        h = self.embed(s)
        y, u = x, v * dt  # velocities as displacements over one step (Å)
        for layer in self.layers:
            y, u, h = layer(y, u, h, e)
        rel, m = self.out.messages(y, h, e)
        vel = self.out.phi_v(h) * v + (rel * self.out.phi_x(m)).sum(2) / max(n - 1, 1)
        return y, vel

    def rollout(self, x, v, z, dt: float, steps: int, bonds) -> torch.Tensor:
        out = []
        for _ in range(steps):
            x, v = self.step(x, v, z, dt, edge_features(x, bonds))
            out.append(x)
        return torch.stack(out, 1)


class TimeConv(nn.Module):
    """A Fourier convolution over the frame axis (dim 1) of ``u [B, P, ..., C]``: the lowest ``modes`` modes of
    the rFFT mixed across the C channels by complex weights, the rest dropped (FNO's spectral layer, as EGNO uses
    it over time)."""

    def __init__(self, channels: int, modes: int):
        super().__init__()
        self.modes = modes
        scale = 1 / channels
        self.w = nn.Parameter(scale * torch.randn(modes, channels, channels, dtype=torch.cfloat))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        p = u.shape[1]
        k = min(self.modes, p // 2 + 1)
        f = torch.fft.rfft(u, dim=1)
        out = torch.zeros_like(f)
        out[:, :k] = torch.einsum("bk...c,kcd->bk...d", f[:, :k], self.w[:k])
        return torch.fft.irfft(out, n=p, dim=1)


class EGNO(nn.Module):
    """EGNO: every output frame starts from the present; per layer a Fourier convolution over frames (invariant
    features; positions and velocities as two vector channels) then an EGCL per frame."""

    def __init__(self, hidden: int = 64, layers: int = 4, frames: int = 8, modes: int = 2, time_dim: int = 32):
        super().__init__()
        self.time_dim = time_dim
        self.embed = nn.Linear(2 + time_dim, hidden)
        self.layers = nn.ModuleList(EGCL(hidden) for _ in range(layers))
        self.conv_h = nn.ModuleList(TimeConv(hidden, modes) for _ in range(layers))
        self.conv_x = nn.ModuleList(TimeConv(2, modes) for _ in range(layers))

    def forward(self, x, v, z, times, bonds) -> torch.Tensor:
        b, n, _ = x.shape
        p = len(times)
        c = x.mean(1, keepdim=True)
        e = edge_features(x, bonds).unsqueeze(1).expand(b, p, n, n, 2).reshape(b * p, n, n, 2)
        temb = time_features(times.to(x) / 1000, self.time_dim)  # sin/cos of ω_k · (t_p − t_0) fs
        s = torch.stack([(z.to(x) / 10).expand(b, n), (v * V_SCALE).norm(dim=-1)], -1)
        h = self.embed(torch.cat([s[:, None].expand(b, p, n, 2), temb[None, :, None].expand(b, p, n, -1)], -1))
        y = (x - c)[:, None].expand(b, p, n, 3)
        u = (v * V_SCALE)[:, None].expand(b, p, n, 3)
        for layer, ch, cx in zip(self.layers, self.conv_h, self.conv_x):
            h = h + F.silu(ch(h))
            yu = torch.stack([y, u], -1)
            yu = yu + cx(yu)
            y, u = yu[..., 0], yu[..., 1]
            y, u, h = (
                t.reshape(b, p, *t.shape[1:])
                for t in layer(y.reshape(b * p, n, 3), u.reshape(b * p, n, 3), h.reshape(b * p, n, -1), e)
            )
        return y + c[:, None]


def constant_velocity(x: torch.Tensor, v: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
    """``x + v · t`` at each of ``times [P]``: ``[B, P, N, 3]``."""
    return x[:, None] + v[:, None] * times.to(x)[None, :, None, None]


def random_rotations(n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` rotation matrices drawn uniformly from SO(3) (QR of Gaussian matrices, signs fixed)."""
    a = torch.randn(n, 3, 3, generator=generator)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    det = torch.det(q)
    q[:, :, 0] *= det.sign().unsqueeze(-1)
    return q
