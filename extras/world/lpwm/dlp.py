r"""The deep latent particles (DLP) of LPWM: each frame becomes a set of particles and a background latent, and is
rendered back from them (``taldatech/lpwm``: ``modules/modules.py``, ``utils/loss_functions.py``).

**Proposals** (the prior): a small CNN's heat map is split into ``P`` patches and a spatial softmax in each gives
one keypoint μ_p and its spread (the variance of the softmax).

**Particles** (the posterior): one per patch, anchored at its proposal, so slot k is always patch k. A glimpse of
``anchor_s`` of the image around the anchor (with its pixel coordinates) is encoded into a bounded position offset,
a scale, a depth, a transparency o ~ Beta(a, b) and visual features, each a Gaussian but o. The background is one
more latent (a coarse 8² image, upsampled).

**Rendering**: each particle's features decode to an RGBA glimpse, placed by a spatial transformer at the particle's
position and scale. The ``particles`` (K) of lowest score are drawn (the official decoder-side filter,
``filter_particles_in_decoder``), composited by depth as the official code does,

.. math::
    w_k = \frac{o_k \alpha_k\,\sigma(-d_k)}{\sum_j o_j \alpha_j\,\sigma(-d_j) + \epsilon},\qquad
    \hat x = \sum_k w_k\, o_k \alpha_k\, \mathrm{rgb}_k + \Big(1 - \sum_k w_k\, o_k \alpha_k\Big)\,\mathrm{bg},

so where two opaque glimpses overlap, the nearer one (smaller d) shows.

**Loss**: reconstruction + β_KL (Chamfer-KL of the particles' positions to the proposals + KLs of scale, depth,
features and background to their priors + the Beta KL of o to Beta(0.01, 0.01)) + β_obj (Σ_k o_k)², the official's
transparency term, which makes particles pay for being on (summed here over the K drawn particles: summed over all
P, it switched every particle off within 200 steps, as the P − K undrawn ones have no reconstruction to defend).
Chamfer-KL matches each particle to its nearest proposal and each proposal to its nearest particle in KL,

.. math::
    \mathrm{CKL}(q \,\|\, p) = \sum_i \min_j \mathrm{KL}(q_i \| p_j) + \sum_j \min_i \mathrm{KL}(q_i \| p_j).

>>> q_mu, p_mu = torch.zeros(1, 2, 2), torch.tensor([[[0.0, 0.0], [1.0, 0.0]]])
>>> float(chamfer_kl(q_mu, torch.zeros(1, 2, 2), p_mu, torch.zeros(1, 2, 2))[0])  # min row: 0, 0; min column: 0, 0.5
0.5
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Beta, kl_divergence

from agentkit.extras.nets import gaussian, psnr_each


def gauss_kl(mu_q: torch.Tensor, logvar_q: torch.Tensor, mu_p, logvar_p) -> torch.Tensor:
    """Elementwise KL(N(μ_q, σ_q²) ‖ N(μ_p, σ_p²)) (summing is left to the caller)."""
    logvar_p = torch.as_tensor(logvar_p, dtype=mu_q.dtype, device=mu_q.device)
    return 0.5 * (logvar_p - logvar_q + (logvar_q.exp() + (mu_q - mu_p) ** 2) / logvar_p.exp() - 1)


def chamfer_kl(mu_q: torch.Tensor, logvar_q: torch.Tensor, mu_p: torch.Tensor, logvar_p: torch.Tensor) -> torch.Tensor:
    """``[B]``: Chamfer-KL of particles ``q [B, N, D]`` to proposals ``p [B, M, D]`` (the official ChamferLossKL)."""
    kl = gauss_kl(mu_q[:, :, None], logvar_q[:, :, None], mu_p[:, None], logvar_p[:, None]).sum(-1)  # [B, N, M]
    return kl.min(1).values.sum(1) + kl.min(2).values.sum(1)


def drawn(score: torch.Tensor, k: int) -> torch.Tensor:
    """Indices ``[..., k]`` of the ``k`` particles of lowest ``score [..., P]``: those the renderer draws."""
    return score.topk(min(k, score.shape[-1]), dim=-1, largest=False).indices


def spatial_softmax_patches(heat: torch.Tensor, patch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One keypoint per ``patch``² patch of ``heat [B, H, W]``: the softmax-weighted mean position ``[B, P, 2]``
    (x, y in [−1, 1] image coordinates, patches in row-major order) and its variance ``[B, P]``.

    >>> h = torch.full((1, 4, 4), -30.0); h[0, 1, 2] = 0.0  # a peak in the top-right patch, row 1, column 2
    >>> mu, var = spatial_softmax_patches(h, 2)
    >>> [round(v, 3) for v in mu[0, 1].tolist()], round(float(var[0, 1]), 4)
    ([0.25, -0.25], 0.0)
    """
    b, h, w = heat.shape
    ph, pw = h // patch, w // patch
    tiles = heat.view(b, ph, patch, pw, patch).permute(0, 1, 3, 2, 4).reshape(b, ph * pw, patch * patch)
    prob = tiles.softmax(-1)
    ys, xs = torch.meshgrid(torch.arange(h, device=heat.device), torch.arange(w, device=heat.device), indexing="ij")
    gx = ((xs + 0.5) / w * 2 - 1).view(ph, patch, pw, patch).permute(0, 2, 1, 3).reshape(ph * pw, patch * patch)
    gy = ((ys + 0.5) / h * 2 - 1).view(ph, patch, pw, patch).permute(0, 2, 1, 3).reshape(ph * pw, patch * patch)
    mx, my = (prob * gx).sum(-1), (prob * gy).sum(-1)
    var = (prob * ((gx - mx[..., None]) ** 2 + (gy - my[..., None]) ** 2)).sum(-1)
    return torch.stack([mx, my], -1), var


def crop(images: torch.Tensor, centres: torch.Tensor, extent: float, out: int) -> torch.Tensor:
    """Glimpses ``[B, K, C, out, out]`` of ``images [B, C, H, W]``, each ``extent`` of the image wide, centred at
    ``centres [B, K, 2]`` (x, y in [−1, 1])."""
    b, k = centres.shape[:2]
    theta = torch.zeros(b * k, 2, 3, device=images.device, dtype=images.dtype)
    theta[:, 0, 0] = theta[:, 1, 1] = extent
    theta[:, :, 2] = centres.reshape(b * k, 2)
    grid = F.affine_grid(theta, [b * k, images.shape[1], out, out], align_corners=False)
    src = images[:, None].expand(b, k, *images.shape[1:]).reshape(b * k, *images.shape[1:])
    return F.grid_sample(src, grid, align_corners=False).view(b, k, images.shape[1], out, out)


def place(glimpses: torch.Tensor, centres: torch.Tensor, scales: torch.Tensor, size: int) -> torch.Tensor:
    """Glimpses ``[B, K, C, g, g]`` placed on a ``size``² canvas ``[B, K, C, size, size]`` (zero outside), each
    ``scales [B, K, 2]`` of the image wide and high, centred at ``centres [B, K, 2]``: the inverse of ``crop``."""
    b, k, c = glimpses.shape[:3]
    s = scales.reshape(b * k, 2).clamp(min=1e-3)
    theta = torch.zeros(b * k, 2, 3, device=glimpses.device, dtype=glimpses.dtype)
    theta[:, 0, 0], theta[:, 1, 1] = 1 / s[:, 0], 1 / s[:, 1]
    theta[:, :, 2] = -centres.reshape(b * k, 2) / s
    grid = F.affine_grid(theta, [b * k, c, size, size], align_corners=False)
    return F.grid_sample(glimpses.reshape(b * k, c, *glimpses.shape[3:]), grid, align_corners=False).view(
        b, k, c, size, size
    )


def composite(rgba: torch.Tensor, obj_on: torch.Tensor, depth: torch.Tensor, bg: torch.Tensor, eps: float = 1e-5):
    """The official depth compositing: ``rgba [B, K, 4, H, W]`` placed glimpses (alpha first), transparencies
    ``obj_on [B, K]``, depths ``[B, K]`` (smaller is nearer), background ``[B, 3, H, W]`` → ``[B, 3, H, W]``.

    >>> red, blue = torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([1.0, 0.0, 0.0, 1.0])  # alpha, r, g, b
    >>> rgba = torch.stack([red, blue])[None, :, :, None, None].expand(1, 2, 4, 1, 1)
    >>> img = composite(rgba, torch.ones(1, 2), torch.tensor([[-6.0, 6.0]]), torch.zeros(1, 3, 1, 1))
    >>> [round(v, 2) for v in img[0, :, 0, 0].tolist()]  # red is nearer
    [1.0, 0.0, 0.0]
    """
    alpha = obj_on[..., None, None, None] * rgba[:, :, :1]
    importance = alpha * torch.sigmoid(-depth)[..., None, None, None]
    importance = importance / (importance.sum(1, keepdim=True) + eps)
    objects = (importance * alpha * rgba[:, :, 1:]).sum(1)
    return objects + (1 - (importance * alpha).sum(1)) * bg


def _cnn(channels: list[int], stride: int = 2) -> nn.Sequential:
    mods: list[nn.Module] = []
    for a, b in zip(channels[:-1], channels[1:]):
        mods += [nn.Conv2d(a, b, 3, stride, 1), nn.GELU()]
    return nn.Sequential(*mods)


class DLP(nn.Module):
    """Encoder and renderer of single frames ``[B, 3, S, S]`` in [0, 1]: ``encode`` gives the particles' posterior
    (one a patch of ``patch``²), ``decode`` renders sampled or mean particles, ``loss`` is the single-frame ELBO.

    Particle attributes, as tensors ``[B, P, ·]``: ``pos`` (x, y in [−1, 1]), ``scale`` (logit of the glimpse's share
    of the image, per axis), ``depth`` (1), ``obj_on`` (Beta's a, b), ``features`` (``features`` d); ``score`` is the
    proposal's log variance (lower: sharper; the renderer draws the ``particles`` lowest).
    """

    def __init__(
        self,
        size: int = 64,
        patch: int = 8,
        features: int = 4,
        bg_features: int = 4,
        particles: int = 12,
        anchor_s: float = 0.25,
        glimpse: int = 16,
        width: int = 32,
    ):
        super().__init__()
        self.size, self.patch, self.features, self.bg_features = size, patch, features, bg_features
        self.particles, self.anchor_s, self.glimpse = particles, anchor_s, glimpse
        # proposals: a heat map at half resolution, one keypoint a (patch/2)² tile of it
        self.prior = nn.Sequential(
            nn.Conv2d(3, width // 2, 3, 1, 1),
            nn.GELU(),
            nn.Conv2d(width // 2, width // 2, 3, 2, 1),
            nn.GELU(),
            nn.Conv2d(width // 2, 1, 1),
        )
        self.glimpse_enc = nn.Sequential(_cnn([5, width // 2, width]), nn.Flatten())  # rgb + x, y coordinates
        g4 = glimpse // 4
        self.glimpse_head = nn.Sequential(
            nn.Linear(width * g4 * g4, 128), nn.GELU(), nn.Linear(128, 2 * (2 + 2 + 1 + features) + 2)
        )
        self.obj_dec = nn.Sequential(nn.Linear(features, 128), nn.GELU(), nn.Linear(128, 4 * glimpse * glimpse))
        # the background: a coarse 8² image, bilinearly upsampled (backgrounds here are smooth)
        self.bg_enc = nn.Sequential(
            _cnn([3, width // 4, width // 2, width // 2]),
            nn.Flatten(),
            nn.Linear(width // 2 * (size // 8) ** 2, 2 * bg_features),
        )
        self.bg_dec = nn.Sequential(nn.Linear(bg_features, 128), nn.GELU(), nn.Linear(128, 3 * 8 * 8))
        self.register_buffer("scale_prior", torch.tensor(math.log(anchor_s / (1 - anchor_s))))
        gy, gx = torch.meshgrid(torch.linspace(-1, 1, glimpse), torch.linspace(-1, 1, glimpse), indexing="ij")
        self.register_buffer("glimpse_coords", torch.stack([gx, gy])[None, None])

    def proposals(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keypoint proposals ``[B, P, 2]`` and their log variances ``[B, P]``."""
        mu, var = spatial_softmax_patches(self.prior(x)[:, 0], self.patch // 2)
        return mu, var.clamp(min=1e-6).log()

    def encode(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The posterior of frames ``x [B, 3, S, S]``: one particle a patch (slot k is patch k in row-major order,
        so a slot keeps its place on screen from frame to frame), with μ and log σ² of every Gaussian attribute,
        Beta's a and b, and the proposal's ``score``; ``proposals`` are the keypoints for the Chamfer-KL."""
        kp, score = self.proposals(x)
        b, p = kp.shape[:2]
        g = crop(x, kp.detach(), self.anchor_s, self.glimpse)
        g = torch.cat([g, self.glimpse_coords.expand(b, p, 2, self.glimpse, self.glimpse)], 2)
        h = self.glimpse_head(self.glimpse_enc(g.flatten(0, 1))).view(b, p, -1)
        ab, h = h[..., :2], h[..., 2:]
        mu, logvar = gaussian(h)
        off_mu, sc_mu, d_mu, f_mu = mu.split([2, 2, 1, self.features], -1)
        off_lv, sc_lv, d_lv, f_lv = logvar.split([2, 2, 1, self.features], -1)
        bg_mu, bg_lv = gaussian(self.bg_enc(x))
        return {
            "proposals": kp,
            "score": score,
            "pos_mu": kp.detach() + 0.2 * torch.tanh(off_mu),  # the anchor + a bounded offset
            "pos_logvar": off_lv,
            "scale_mu": self.scale_prior + sc_mu,
            "scale_logvar": sc_lv,
            "depth_mu": d_mu[..., 0],
            "depth_logvar": d_lv[..., 0],
            "features_mu": f_mu,
            "features_logvar": f_lv,
            "obj_a": F.softplus(ab[..., 0]) + 1e-2,
            "obj_b": F.softplus(ab[..., 1]) + 1e-2,
            "bg_mu": bg_mu,
            "bg_logvar": bg_lv,
        }

    @staticmethod
    def sample(q: dict[str, torch.Tensor], mean: bool = False) -> dict[str, torch.Tensor]:
        """Particles drawn from the posterior ``q`` (reparameterised), or its means."""
        out = {"score": q["score"]}
        for name in ("pos", "scale", "depth", "features", "bg"):
            mu, lv = q[f"{name}_mu"], q[f"{name}_logvar"]
            out[name] = mu if mean else mu + torch.randn_like(mu) * (0.5 * lv).exp()
        a, b = q["obj_a"], q["obj_b"]
        out["obj_on"] = a / (a + b) if mean else Beta(a, b).rsample().clamp(1e-4, 1 - 1e-4)
        return out

    def decode(self, z: dict[str, torch.Tensor], rendered: bool = False):
        """Render particles ``z`` (``pos``, ``scale``, ``depth``, ``obj_on``, ``features``, ``score``; each
        ``[B, P, ·]``; ``bg [B, ·]``) into ``[B, 3, S, S]``: the ``particles`` of lowest score (the official
        decoder-side filter), composited over the background; ``rendered`` also returns which were drawn ``[B, K]``."""
        keep = drawn(z["score"], self.particles)
        pick = lambda t: t.gather(1, keep.view(*keep.shape, *[1] * (t.dim() - 2)).expand(-1, -1, *t.shape[2:]))  # noqa: E731
        pos, scale, depth, obj_on, feat = (pick(z[k]) for k in ("pos", "scale", "depth", "obj_on", "features"))
        b = pos.shape[0]
        k = pos.shape[1]
        rgba = torch.sigmoid(self.obj_dec(feat)).view(b, k, 4, self.glimpse, self.glimpse)
        placed = place(rgba, pos, torch.sigmoid(scale), self.size)
        bg = torch.sigmoid(self.bg_dec(z["bg"]).view(b, 3, 8, 8))
        bg = F.interpolate(bg, size=(self.size, self.size), mode="bilinear", align_corners=False)
        img = composite(placed, obj_on, depth, bg)
        return (img, keep) if rendered else img

    def loss(
        self,
        x: torch.Tensor,
        beta_kl: float,
        beta_obj: float,
        kp_std: float = 0.2,
        scale_std: float = 0.3,
        obj_prior: float = 0.01,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The single-frame objective on ``x [B, 3, S, S]`` (sum over pixels, mean over frames), with its parts."""
        q = self.encode(x)
        z = self.sample(q)
        rec, keep = self.decode(z, rendered=True)
        shown_on = z["obj_on"].gather(1, keep)
        loss_rec = (rec - x).pow(2).flatten(1).sum(1)
        kp_lv = torch.full_like(q["proposals"], 2 * math.log(kp_std))
        kl_pos = chamfer_kl(q["pos_mu"], q["pos_logvar"], q["proposals"], kp_lv)
        kl_scale = gauss_kl(q["scale_mu"], q["scale_logvar"], self.scale_prior, 2 * math.log(scale_std)).sum((1, 2))
        kl_depth = gauss_kl(q["depth_mu"], q["depth_logvar"], 0.0, 0.0).sum(1)
        kl_feat = gauss_kl(q["features_mu"], q["features_logvar"], 0.0, 0.0).sum((1, 2))
        kl_bg = gauss_kl(q["bg_mu"], q["bg_logvar"], 0.0, 0.0).sum(1)
        prior = Beta(torch.full_like(q["obj_a"], obj_prior), torch.full_like(q["obj_b"], obj_prior))
        kl_obj = kl_divergence(Beta(q["obj_a"], q["obj_b"]), prior).sum(1)
        kl = kl_pos + kl_scale + kl_depth + kl_feat + kl_bg + kl_obj
        reg = shown_on.sum(1).pow(2)
        total = (loss_rec + beta_kl * kl + beta_obj * reg).mean()
        with torch.no_grad():
            parts = {
                "loss": total.item(),
                "psnr": float(psnr_each(rec.clamp(0, 1), x).mean()),
                "kl": float(kl.mean()),
                "on": float((shown_on > 0.5).float().sum(1).mean()),
            }
        return total, parts


FIXED_LOGVAR = 2 * math.log(0.2)  # the posterior spread given to the transparency logit and the score (official: 0.2)


def to_tokens(q: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A posterior (``DLP.encode``) as dynamics tokens: particles' μ and log σ² ``[B, K, 7 + F]`` (position 2,
    scale 2, depth, transparency logit, score, features F) and the background's ``[B, Fb]``."""
    a, b = q["obj_a"], q["obj_b"]
    obj = torch.logit((a / (a + b)).clamp(1e-3, 1 - 1e-3))
    fixed = torch.full_like(obj, FIXED_LOGVAR)
    mu = torch.cat(
        [q["pos_mu"], q["scale_mu"], q["depth_mu"][..., None], obj[..., None], q["score"][..., None], q["features_mu"]],
        -1,
    )
    lv = torch.cat(
        [
            q["pos_logvar"],
            q["scale_logvar"],
            q["depth_logvar"][..., None],
            fixed[..., None],
            fixed[..., None],
            q["features_logvar"],
        ],
        -1,
    )
    return mu, lv, q["bg_mu"], q["bg_logvar"]


def kl_weights(z_mu: torch.Tensor, k: int) -> torch.Tensor:
    """``[..., P, 7 + F]`` weights of the dynamic KL per token dimension, as the official ``calc_dynamic_kl``: the
    position, scale, depth and features of a particle count by its transparency (an off particle's attributes are
    free), its transparency and score always. Here a particle the renderer does not draw (not among the ``k`` of
    lowest score) counts as off too.

    >>> z = torch.zeros(1, 3, 9); z[0, :, 5] = torch.tensor([10.0, -10.0, 10.0]); z[0, :, 6] = torch.tensor([0.0, 1.0, 2.0])
    >>> kl_weights(z, k=2)[0, :, [0, 5, 6]].round(decimals=3).tolist()  # particle 2 is on but not drawn
    [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    """
    on = torch.sigmoid(z_mu[..., 5])
    drawn_mask = torch.zeros_like(on).scatter(-1, drawn(z_mu[..., 6], k), 1.0)
    w = (on * drawn_mask)[..., None].expand_as(z_mu).clone()
    w[..., 5:7] = 1.0
    return w


def from_tokens(z: torch.Tensor, bg: torch.Tensor) -> dict[str, torch.Tensor]:
    """Tokens ``[..., K, 7 + F]`` and ``[..., Fb]`` back to particles for ``DLP.decode``."""
    pos, scale, depth, obj, score, feat = z.split([2, 2, 1, 1, 1, z.shape[-1] - 7], -1)
    return {
        "pos": pos,
        "scale": scale,
        "depth": depth[..., 0],
        "obj_on": torch.sigmoid(obj[..., 0]),
        "score": score[..., 0],
        "features": feat,
        "bg": bg,
    }
