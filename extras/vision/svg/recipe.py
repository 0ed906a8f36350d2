"""extras.vision.svg: diffusion on self-supervised features without a VAE (SVG). A small ViT trained here with
VICReg and frozen stands in for DINO; a residual ViT (8 channels, aligned to the SSL features' statistics, 10 % mask
tokens) adds what it misses; a conv decoder reconstructs the image; a SiT with QK-norm is trained by flow matching
on the latent. Compared with the same SiT on a same-size KL-VAE latent, and ablated without the residual and
without the alignment, on Fashion-MNIST padded to 32², by FID on a classifier's penultimate features at 5, 10 and
25 Euler steps."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.nets import (
    SmallCNN,
    batched,
    euler_sample,
    fit,
    flow_pair,
    linear_probe,
    psnr,
    vicreg,
    warmup_cosine,
)
from agentkit.extras.sweep import stage, sweep
from agentkit.extras.vision.svg.config import SVGConfig
from agentkit.extras.vision.svg.model import (
    Decoder,
    KLEncoder,
    ResidualEncoder,
    SiT,
    SSLEncoder,
    align,
    frechet_distance,
)
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "svg": "SVG (SSL + aligned residual)",
    "unaligned": "residual without alignment",
    "ssl_only": "SSL features only",
    "vae": "KL-VAE latent (SD-VAE role)",
}
PATCH, GRID = 4, 8  # 32² images → an 8 × 8 latent grid
SHOWN = 16  # samples per grid picture
PROBE_CS = (0.003, 0.01)  # the probes' inverse regularisation, picked on validation


class SVGRecipe(Recipe[SVGConfig]):
    name = "extras.vision.svg"
    config_cls = SVGConfig
    description = "SVG: flow matching on frozen SSL features + aligned residual vs a KL-VAE latent"

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every latent)")
        fids = [f"fid@{k}" for k in c.euler_steps]
        metrics = fids + ["rfid", "psnr", "probe"]
        res = {lab: per for lab, per in grid.nested((), metrics).items() if lab in LABELS.values()}
        base = {lab: per for lab, per in grid.nested((), ["probe"]).items() if lab not in LABELS.values()}
        self.ctx.add_section(
            f"{c.seeds} seeds",
            f"fid@k: Fréchet distance on the penultimate features of a classifier trained here (Inception's weights "
            f"download), {c.fid_samples} samples from k Euler steps against {min(c.fid_samples, c.test_size)} test "
            "images; rfid: the same for the decoder's reconstructions of test images (the latent's ceiling); psnr: "
            "reconstruction PSNR on test images (dB); probe: logistic-regression accuracy on the test latents "
            f"(the whole 8 × 8 grid, fitted on {c.probe_size} training images, C picked on validation).\n\n"
            + report.table(res, metrics)
            + "\n\n"
            + report.paired(res, LABELS["vae"], fids)
            + "\n\n"
            + report.paired(res, LABELS["svg"], fids)
            + "\n\nThe frozen SSL encoder's own linear probe (its patch features) against raw pixels:\n\n"
            + report.table(base, ["probe"]),
        )
        self._plot(grid, res)
        return report.means(res, fids + ["psnr", "probe"]) | report.means(base, ["probe"])

    # ---- data -------------------------------------------------------------------------------------------------
    def _data(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        c = self.config
        d = data.fashion_mnist_splits(c.train_size, c.val_size, c.test_size)
        return {k: (F.pad(x, (2, 2, 2, 2))[:, None], y) for k, (x, y) in d.items()}  # [N, 1, 32, 32] in [0, 1]

    # ---- the frozen stages ------------------------------------------------------------------------------------
    def _classifier(self, d, seed: int) -> dict[str, Any]:
        torch.manual_seed(seed)
        net = SmallCNN(size=32)
        acc = fit(net, torch.optim.Adam(net.parameters(), 1e-3), d["train"], d["val"], d["test"], 4, 128)[
            "test_accuracy"
        ]
        return {"state": net.state_dict(), "accuracy": acc}

    def _ssl(self, x: torch.Tensor, seed: int) -> dict[str, Any]:
        """VICReg on two augmented views of each image (the DINO role), mean-pooled patch tokens."""
        c = self.config
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        enc = SSLEncoder(32, PATCH, c.ssl_dim, c.ssl_depth, c.heads)
        opt = torch.optim.AdamW(enc.parameters(), lr=c.lr, weight_decay=0.05)
        sched = warmup_cosine(opt, c.ssl_steps)
        losses = []
        for _ in self.ctx.progress(range(c.ssl_steps), f"SSL ViT (seed {seed})"):
            xb = x[torch.randint(len(x), (c.ssl_batch,), generator=g)]
            loss = vicreg(enc.embed(_norm(augment(xb, g))), enc.embed(_norm(augment(xb, g))))["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        return {"state": enc.state_dict(), "losses": report.thin(losses)}

    def _autoencoder(self, kind: str, ssl: SSLEncoder, d, seed: int) -> dict[str, Any]:
        """The latent's encoder (residual ViT, or the KL-VAE's) and its decoder, on MSE (+ KL for the VAE); the
        state with the best validation MSE is kept."""
        c = self.config
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        enc = self._encoder(kind)
        dec = Decoder(self._channels(kind), c.decoder_width)
        params = [p for m in (enc, dec) if m is not None for p in m.parameters()]
        opt = torch.optim.AdamW(params, lr=c.lr, weight_decay=0.0)
        sched = warmup_cosine(opt, c.ae_steps)
        x, xv = d["train"][0], d["val"][0]
        f_d = None if kind == "vae" else self._ssl_features(ssl, x)  # frozen: computed once
        best, losses = (float("inf"), None), []
        for step in self.ctx.progress(range(c.ae_steps), f"{kind} decoder (seed {seed})"):
            i = torch.randint(len(x), (c.ae_batch,), generator=g)
            xb = x[i]
            z, kl = self._encode(kind, ssl, enc, xb, train=True, f_d=None if f_d is None else f_d[i])
            loss = (dec(z) - xb).pow(2).mean() + c.kl_weight * kl
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if (step + 1) % max(1, c.ae_steps // 8) == 0 or step + 1 == c.ae_steps:
                with torch.no_grad():
                    v = float((self._decode_all(kind, ssl, enc, dec, xv) - xv).pow(2).mean())
                if v < best[0]:
                    best = (v, {"enc": None if enc is None else _clone(enc), "dec": _clone(dec)})
        return {"state": best[1], "val_mse": best[0], "losses": report.thin(losses)}

    def _sit(self, z: torch.Tensor, decode, ref: torch.Tensor, seed: int, kind: str) -> dict[str, Any]:
        """Flow matching on standardised latents ``z [N, C, 8, 8]``; every ``fid_every`` steps the FID at the
        largest Euler step count on half the samples (``decode`` maps standardised latents to features)."""
        c = self.config
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        net = SiT(z.shape[1], GRID, c.sit_dim, c.sit_depth, c.heads)
        opt = torch.optim.AdamW(net.parameters(), lr=c.lr, weight_decay=0.0)
        sched = warmup_cosine(opt, c.sit_steps)
        losses, curve = [], []
        for step in self.ctx.progress(range(c.sit_steps), f"SiT on {kind} (seed {seed})"):
            x0 = z[torch.randint(len(z), (c.sit_batch,), generator=g)]
            eps = torch.randn(x0.shape, generator=g)
            t = torch.rand(len(x0), generator=g)
            xt, v = flow_pair(x0, eps, t)
            loss = (net(xt, t) - v).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if (step + 1) % c.fid_every == 0 or step + 1 == c.sit_steps:
                n = max(16, c.fid_samples // 2)
                noise = torch.randn(n, *z.shape[1:], generator=torch.Generator().manual_seed(seed + 7))
                feats = decode(batched(net, noise, lambda m, b: euler_sample(m, b, max(c.euler_steps)), 500))
                curve.append([step + 1, frechet_distance(feats, ref[:n])])
                net.train()
        return {"state": _clone(net), "losses": report.thin(losses), "fid_curve": curve}

    # ---- latents ----------------------------------------------------------------------------------------------
    def _channels(self, kind: str) -> int:
        c = self.config
        return c.ssl_dim + (0 if kind == "ssl_only" else c.residual_channels)

    def _encoder(self, kind: str):
        c = self.config
        if kind == "ssl_only":
            return None
        if kind == "vae":
            return KLEncoder(self._channels(kind), c.decoder_width)
        return ResidualEncoder(32, PATCH, c.residual_dim, c.residual_depth, c.heads, c.residual_channels, c.mask_ratio)

    @torch.no_grad()
    def _ssl_features(self, ssl: SSLEncoder, x: torch.Tensor) -> torch.Tensor:
        """The frozen SSL patch features ``[N, D, 64]`` of images ``x``."""
        return torch.cat([ssl.features(_norm(b)) for b in x.split(500)])

    def _encode(self, kind: str, ssl: SSLEncoder, enc, x: torch.Tensor, train: bool = False, f_d=None):
        """The latent ``[B, C, 8, 8]`` of images ``x`` and the KL term (0 but for the VAE); ``f_d``: their SSL
        features, when already computed."""
        if enc is not None:
            enc.train(train)
        if kind == "vae":
            z, mu, logvar = enc(x)
            kl = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).mean()
            return z, kl
        if f_d is None:
            with torch.no_grad():
                f_d = ssl.features(_norm(x))  # [B, D, N], frozen
        parts = [f_d]
        if kind != "ssl_only":
            f_r = enc(x)
            parts.append(align(f_r, f_d) if kind == "svg" else f_r)
        z = torch.cat(parts, 1)
        return z.view(len(z), -1, GRID, GRID), torch.zeros(())

    @torch.no_grad()
    def _latents(self, kind, ssl, enc, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self._encode(kind, ssl, enc, b)[0] for b in x.split(500)])

    @torch.no_grad()
    def _decode_all(self, kind, ssl, enc, dec, x: torch.Tensor) -> torch.Tensor:
        dec.eval()
        out = torch.cat([dec(self._encode(kind, ssl, enc, b)[0]) for b in x.split(500)])
        dec.train()
        return out

    # ---- one seed -------------------------------------------------------------------------------------------
    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        d = self._data()
        clf = SmallCNN(size=32)
        clf.load_state_dict(stage(self.ctx, f"seed{seed}-classifier", lambda: self._classifier(d, seed))["state"])
        clf.eval()

        def feats(img: torch.Tensor) -> torch.Tensor:
            return batched(clf, img.clamp(0, 1), lambda m, b: m.features(b), 1000)

        x_te = d["test"][0]
        ref = feats(x_te[: c.fid_samples])
        ssl = SSLEncoder(32, PATCH, c.ssl_dim, c.ssl_depth, c.heads)
        ssl.load_state_dict(stage(self.ctx, f"seed{seed}-ssl", lambda: self._ssl(d["train"][0], seed))["state"])
        ssl.eval()
        # the probes' rows: the first probe_size training images, then validation, then test
        n_pr, n_va = min(len(d["train"][0]), c.probe_size), len(d["val"][0])
        tr_i, va_i, te_i = np.arange(n_pr), n_pr + np.arange(n_va), n_pr + n_va + np.arange(len(x_te))
        y_all = torch.cat([d["train"][1][:n_pr], d["val"][1], d["test"][1]])
        x_all = torch.cat([d["train"][0][:n_pr], d["val"][0], x_te])
        feats_all = self._ssl_features(ssl, x_all).flatten(1)
        out: dict[str, Any] = {
            "frozen SSL encoder": {
                "probe": linear_probe(feats_all, y_all, tr_i, va_i, te_i, PROBE_CS, c.probe_iters)["test_accuracy"]
            },
            "raw pixels": {
                "probe": linear_probe(x_all.flatten(1), y_all, tr_i, va_i, te_i, PROBE_CS, c.probe_iters)[
                    "test_accuracy"
                ]
            },
        }
        grids: dict[str, Any] = {}
        for kind in c.latents:
            enc, dec = self._encoder(kind), Decoder(self._channels(kind), c.decoder_width)
            ae = stage(
                self.ctx, f"seed{seed}-{kind}-autoencoder", lambda kind=kind: self._autoencoder(kind, ssl, d, seed)
            )
            if enc is not None:
                enc.load_state_dict(ae["state"]["enc"])
                enc.eval()
            dec.load_state_dict(ae["state"]["dec"])
            dec.eval()
            z = self._latents(kind, ssl, enc, d["train"][0])
            mu, sd = z.mean(dim=(0, 2, 3), keepdim=True), z.std(dim=(0, 2, 3), keepdim=True) + 1e-6

            def decode(zn: torch.Tensor, dec=dec, mu=mu, sd=sd) -> torch.Tensor:
                return feats(batched(dec, zn * sd + mu, batch=500))

            sit_state = stage(
                self.ctx, f"seed{seed}-{kind}-sit", partial(self._sit, (z - mu) / sd, decode, ref, seed, kind)
            )
            sit = SiT(z.shape[1], GRID, c.sit_dim, c.sit_depth, c.heads)
            sit.load_state_dict(sit_state["state"])
            sit.eval()
            rec = self._decode_all(kind, ssl, enc, dec, x_te)
            row = {
                "psnr": psnr(rec.clamp(0, 1), x_te),
                "rfid": frechet_distance(feats(rec[: c.fid_samples]), ref),
            }
            lat = torch.cat([self._latents(kind, ssl, enc, b) for b in x_all.split(2000)]).flatten(1)
            row["probe"] = linear_probe(lat, y_all, tr_i, va_i, te_i, PROBE_CS, c.probe_iters)["test_accuracy"]
            noise = torch.randn(c.fid_samples, *z.shape[1:], generator=torch.Generator().manual_seed(1000 + seed))
            samples = {}
            for k in c.euler_steps:
                zs = batched(sit, noise, lambda m, b, k=k: euler_sample(m, b, k), 500)
                imgs = batched(dec, zs * sd + mu, batch=500)
                row[f"fid@{k}"] = frechet_distance(feats(imgs), ref)
                samples[k] = np.round(imgs[:SHOWN, 0].clamp(0, 1).numpy(), 3).tolist()
            out[LABELS[kind]] = row
            grids[LABELS[kind]] = {"samples": samples, "fid_curve": sit_state["fid_curve"]}
        out["_grids"] = grids
        return out

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, res) -> None:
        c = self.config
        plt = pyplot()
        first = grid.raw[()][0].get("_grids", {})
        if first:
            rows, cols = len(first), len(c.euler_steps)
            fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.3 * rows), squeeze=False)
            for i, (lab, gd) in enumerate(first.items()):
                for j, k in enumerate(c.euler_steps):
                    imgs = np.asarray(gd["samples"][str(k)] if str(k) in gd["samples"] else gd["samples"][k])
                    side = int(np.ceil(np.sqrt(len(imgs))))
                    canvas = np.ones((side * 32, side * 32))
                    for n, im in enumerate(imgs):
                        r, q = divmod(n, side)
                        canvas[r * 32 : (r + 1) * 32, q * 32 : (q + 1) * 32] = im
                    axes[i, j].imshow(canvas, cmap="gray", vmin=0, vmax=1)
                    axes[i, j].set_xticks([]), axes[i, j].set_yticks([])
                    axes[i, j].set_title(f"{lab}\n{k} Euler steps", fontsize=8)
            fig.tight_layout()
            self.ctx.save_plot(
                fig, "samples", "Samples per latent (rows) and Euler step count (columns), seed 0, same noise"
            )
            fig, ax = plt.subplots(figsize=(5.5, 3.8))
            for lab in first:
                curves = [np.array(r["_grids"][lab]["fid_curve"]) for r in grid.raw[()] if lab in r.get("_grids", {})]
                steps = curves[0][:, 0]
                report.curve(ax, list(steps), [list(cu[:, 1]) for cu in np.stack(curves, 1)], lab)
            ax.set_xlabel("SiT training step")
            ax.set_ylabel(f"FID ({max(c.euler_steps)} Euler steps)")
            ax.set_yscale("log")
            ax.legend(fontsize=7)
            fig.tight_layout()
            self.ctx.save_plot(fig, "fid-vs-steps", "FID against SiT training steps, mean ± std over seeds")
        report.figure(
            self.ctx, res, [f"fid@{k}" for k in c.euler_steps], "fid", "FID at each Euler step count, one dot per seed"
        )

    def evaluate(self) -> dict[str, Any]:
        return {}


def augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """An SSL view of images ``[B, 1, 32, 32]`` in [0, 1]: a random resized crop (scale 0.6–1, shift up to 15 %)
    and horizontal flip through one affine warp, then contrast and brightness jitter and Gaussian noise."""
    b = len(x)
    s = 0.6 + 0.4 * torch.rand(b, generator=g)
    flip = torch.where(torch.rand(b, generator=g) < 0.5, -1.0, 1.0)
    shift = (torch.rand(b, 2, generator=g) - 0.5) * 0.3
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0], theta[:, 1, 1] = s * flip, s
    theta[:, :, 2] = shift
    out = F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=False), align_corners=False)
    contrast = 0.6 + 0.8 * torch.rand(b, 1, 1, 1, generator=g)
    bright = 0.2 * (torch.rand(b, 1, 1, 1, generator=g) - 0.5)
    return (out * contrast + bright + 0.05 * torch.randn(out.shape, generator=g)).clamp(0, 1)


def _norm(x: torch.Tensor) -> torch.Tensor:
    return (x - 0.5) / 0.5


def _clone(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: t.detach().clone() for k, t in m.state_dict().items()}
