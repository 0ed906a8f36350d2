"""extras.vision.screener: density-based anomaly segmentation (Screener). Dense VICReg descriptors y, a
masking-invariant learned condition c and a per-voxel conditional Gaussian q(y | c), scored by −log q, against the
same density with no condition or with the sin-cos positional condition of the UVAS framework, and an
autoencoder's reconstruction error; on seeded CT-like phantoms (3D) and on Fashion-MNIST with pasted anomalies (2D)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.nets import batched, vicreg
from agentkit.extras.sweep import stage, sweep
from agentkit.extras.vision.screener.config import ScreenerConfig
from agentkit.extras.vision.screener.model import (
    GaussianHead,
    augment,
    autoencoder,
    dense_pairs,
    mask_blocks,
    sincos,
    two_crops,
    unet,
    unflip,
)
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "screener": "Screener (learned c)",
    "positional": "positional c (UVAS)",
    "none": "no condition",
    "autoencoder": "autoencoder error",
}
METRICS = ["auroc", "auprc"]
SHOWN = 3  # test images whose maps the report draws (seed 0)


class ScreenerRecipe(Recipe[ScreenerConfig]):
    name = "extras.vision.screener"
    config_cls = ScreenerConfig
    description = "Screener: conditional density of dense SSL features vs no / positional condition and AE error"

    def setup(self) -> None:
        data.require("monai", "vision", "the extras.vision recipes need MONAI")

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [(t,) for t in c.tasks], c.seeds, self._run, desc="tasks × seeds (every method)")
        out: dict[str, Any] = {}
        for task, part in grid.split().items():
            res = {m: v for m, v in part.nested((), METRICS + ["val_nll"]).items() if m in LABELS.values()}
            where = (
                f"{c.phantom_test} phantom volumes of {c.volume_size}³ with 1–2 lesions each (abnormal intensity ±0.5 "
                "or texture), scored over the body's voxels"
                if task == "phantom"
                else f"{c.fmnist_test} Fashion-MNIST test images padded to 32², each with one pasted square or "
                "intensity disk (~5 % of the pixels), scored over every pixel"
            )
            self.ctx.add_section(
                f"{task}: {c.seeds} seeds",
                f"{where}. auroc / auprc: voxel-level, each method's score against the true anomaly mask. "
                "val_nll: the density head's mean −log q(y | c) per voxel and channel on normal validation images (the state "
                "kept). Every density method shares the seed's frozen descriptor network; only c differs.\n\n"
                + report.table(res, METRICS + ["val_nll"])
                + "\n\n"
                + report.paired(res, LABELS["none"], METRICS)
                + "\n\n"
                + report.paired(res, LABELS["positional"], METRICS),
            )
            out |= report.means(res, METRICS, f"{task}/")
            self._plot(task, part, res)
        return out

    # ---- data -------------------------------------------------------------------------------------------------
    def _data(self, task: str, seed: int) -> dict[str, torch.Tensor]:
        """Normal training and validation images, test images with their anomaly masks and scored region, each
        ``[N, 1, *S]`` (masks ``[N, *S]``)."""
        c = self.config
        t = torch.from_numpy
        if task == "phantom":
            tr = data.ct_phantom(c.phantom_train, c.volume_size, seed=1000 * seed + 1)[0]
            va = data.ct_phantom(c.phantom_val, c.volume_size, seed=1000 * seed + 2)[0]
            te, tissue, lesion = data.ct_phantom(c.phantom_test, c.volume_size, lesions=True, seed=1000 * seed + 3)
            region = tissue > 0
        else:
            x, _ = data.fmnist_anomalies(c.fmnist_train + c.fmnist_val, "train", anomalous=False, seed=seed)
            tr, va = x[: c.fmnist_train], x[c.fmnist_train :]
            te, lesion = data.fmnist_anomalies(c.fmnist_test, "test", seed=seed)
            region = np.ones_like(lesion)
        return {
            "train": t(tr)[:, None],
            "val": t(va)[:, None],
            "test": t(te)[:, None],
            "anomaly": t(lesion),
            "region": t(region),
        }

    # ---- the frozen stages ------------------------------------------------------------------------------------
    def _ssl(self, x: torch.Tensor, out_dim: int, masked: bool, seed: int, what: str) -> dict[str, Any]:
        """Dense VICReg on two overlapping augmented crops (``masked``: blocks hidden in each view, the condition
        network). Returns the network's state and its thinned loss curve."""
        c = self.config
        dims, size = x.dim() - 2, x.shape[-1]
        crop = min(size, max(16, int(round(c.crop * size))))  # the UNet pools 4 times: 16 at least
        batch = c.batch_3d if dims == 3 else c.batch_2d
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        net = unet(dims, 1, out_dim, c.width)
        opt = torch.optim.Adam(net.parameters(), lr=c.lr)
        losses = []
        for _ in self.ctx.progress(range(c.ssl_steps), f"{what} (seed {seed})"):
            a, b, offs = two_crops(x[torch.randint(len(x), (batch,), generator=g)], crop, g)
            (a, fa), (b, fb) = augment(a, c.noise, g), augment(b, c.noise, g)
            if masked:
                a, b = mask_blocks(a, c.mask_ratio, c.mask_block, g), mask_blocks(b, c.mask_ratio, c.mask_block, g)
            pa, pb = dense_pairs(unflip(net(a), fa), unflip(net(b), fb), offs, crop, c.pairs, g)
            loss = vicreg(pa, pb)["loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return {"state": net.state_dict(), "losses": report.thin(losses)}

    def _autoencoder(self, x: torch.Tensor, val: torch.Tensor, seed: int) -> dict[str, Any]:
        """The autoencoder baseline on normal images, keeping the state with the best validation MSE."""
        c = self.config
        dims = x.dim() - 2
        batch = c.batch_3d if dims == 3 else c.batch_2d
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        net = autoencoder(dims, c.width)
        opt = torch.optim.Adam(net.parameters(), lr=c.lr)
        best = (float("inf"), None)
        for step in self.ctx.progress(range(c.ssl_steps), f"autoencoder (seed {seed})"):
            xb = x[torch.randint(len(x), (batch,), generator=g)]
            loss = (net(xb) - xb).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if (step + 1) % c.eval_every == 0 or step + 1 == c.ssl_steps:
                v = float(batched(net, val, _sq_error, 8).mean())
                if v < best[0]:
                    best = (v, {k: t.clone() for k, t in net.state_dict().items()})
        return {"state": best[1], "val_mse": best[0]}

    # ---- one seed -------------------------------------------------------------------------------------------
    def _run(self, task: str, seed: int) -> dict[str, Any]:
        c = self.config
        d = self._data(task, seed)
        dims, shape = d["train"].dim() - 2, d["train"].shape[2:]
        key = f"{task}-seed{seed}"
        f = unet(dims, 1, c.y_dim, c.width)
        f.load_state_dict(
            stage(
                self.ctx,
                f"{key}-descriptor",
                lambda: self._ssl(d["train"], c.y_dim, False, seed, f"{task} descriptors"),
            )["state"]
        )
        g = unet(dims, 1, c.cond_dim, c.width)
        g.load_state_dict(
            stage(
                self.ctx,
                f"{key}-condition",
                lambda: self._ssl(d["train"], c.cond_dim, True, seed + 100, f"{task} condition"),
            )["state"]
        )
        f.eval(), g.eval()
        pos = sincos(tuple(shape), c.freqs)
        conds = {
            "screener": lambda xb: batched(g, xb, batch=8),
            "positional": lambda xb: pos.expand(len(xb), *pos.shape),
            "none": lambda xb: torch.zeros(len(xb), 0, *shape),
        }
        rng = torch.Generator().manual_seed(seed)
        train_rows = _rows(f, d["train"], conds, c.voxels_per_image, rng)
        val_rows = _rows(f, d["val"], conds, c.voxels_per_image, rng)
        out: dict[str, Any] = {}
        maps: dict[str, torch.Tensor] = {}
        heads: dict[str, GaussianHead] = {}
        for m in c.methods:
            if m == "autoencoder":
                ae = autoencoder(dims, c.width)
                ae.load_state_dict(
                    stage(self.ctx, f"{key}-autoencoder", lambda: self._autoencoder(d["train"], d["val"], seed))[
                        "state"
                    ]
                )
                ae.eval()
                maps[m] = batched(ae, d["test"], _sq_error, 8)
                out[LABELS[m]] = {}
                continue
            torch.manual_seed(seed)
            heads[m] = GaussianHead(train_rows[m].shape[1], c.y_dim, c.head_hidden)
            val_nll = self._fit_head(heads[m], train_rows["y"], train_rows[m], val_rows["y"], val_rows[m], rng)
            out[LABELS[m]] = {"val_nll": val_nll / c.y_dim}
        parts: dict[str, list[torch.Tensor]] = {m: [] for m in heads}
        with torch.no_grad():  # the test maps: each chunk's descriptors once, for every density head
            for b in d["test"].split(8):
                y = f(b).movedim(1, -1)
                for m, head in heads.items():
                    parts[m].append(head.nll(y, conds[m](b).movedim(1, -1)))
        maps = {m: maps[m] if m in maps else torch.cat(parts[m]) for m in c.methods}
        region, truth = d["region"], d["anomaly"]
        for m, s in maps.items():
            out[LABELS[m]] |= _scores(s, truth, region)
        if seed == 0:
            out["_maps"] = _shown(d["test"][:, 0], truth, region, maps)
        return out

    def _fit_head(self, head, y, cond, val_y, val_cond, rng) -> float:
        """Adam on the mean −log q(y | c) of random voxel batches; keeps the state with the best validation NLL
        (per voxel, summed over the D channels), which it returns."""
        c = self.config
        opt = torch.optim.Adam(head.parameters(), lr=c.lr)
        best = (float("inf"), None)
        for step in range(c.head_steps):
            i = torch.randint(len(y), (min(c.head_batch, len(y)),), generator=rng)
            loss = head.nll(y[i], cond[i]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if (step + 1) % c.eval_every == 0 or step + 1 == c.head_steps:
                with torch.no_grad():
                    v = float(head.nll(val_y, val_cond).mean())
                if v < best[0]:
                    best = (v, {k: t.clone() for k, t in head.state_dict().items()})
        head.load_state_dict(best[1])
        return best[0]

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, task: str, part, res) -> None:
        plt = pyplot()
        shown = part.raw[()][0].get("_maps")
        if shown:
            methods = [m for m in LABELS if m in shown["maps"]]
            cols = 2 + len(methods)
            fig, axes = plt.subplots(
                len(shown["image"]), cols, figsize=(2.2 * cols, 2.3 * len(shown["image"])), squeeze=False
            )
            for i, row in enumerate(axes):
                region = np.asarray(shown["region"][i], bool)
                row[0].imshow(shown["image"][i], cmap="gray")
                row[1].imshow(shown["image"][i], cmap="gray")
                row[1].contour(np.asarray(shown["truth"][i], float), levels=[0.5], colors="r", linewidths=1)
                for ax, m in zip(row[2:], methods):
                    s = np.asarray(shown["maps"][m][i])
                    inside = s[region] if region.any() else s.ravel()
                    ax.imshow(
                        np.where(region, s, np.nan),
                        cmap="magma",
                        vmin=np.percentile(inside, 1),
                        vmax=np.percentile(inside, 99.5),
                    )
                    ax.set_title(f"{LABELS[m]}\nAUROC {shown['auroc'][m][i]:.2f}", fontsize=7)
                row[0].set_title(f"input ({shown['where'][i]})", fontsize=7)
                row[1].set_title("true anomaly", fontsize=7)
                for ax in row:
                    ax.set_xticks([]), ax.set_yticks([])
            fig.tight_layout()
            self.ctx.save_plot(
                fig,
                f"{task}-maps",
                f"{task}: anomaly maps of {len(shown['image'])} test images (seed 0"
                + (", the axial slice with the most lesion voxels" if task == "phantom" else "")
                + "); each map's colours span its 1st–99.5th percentile inside the scored region, per-image AUROC above it",
            )
        report.figure(
            self.ctx, res, METRICS, f"{task}-auroc", f"{task}: voxel AUROC and AUPRC, mean ± std, one dot per seed"
        )

    def evaluate(self) -> dict[str, Any]:
        return {}


@torch.no_grad()
def _rows(f, x: torch.Tensor, conds: dict, per_image: int, rng: torch.Generator) -> dict[str, torch.Tensor]:
    """``per_image`` random voxels of each image: their descriptors (``"y" [N, D]``) and every condition's c."""
    out: dict[str, list[torch.Tensor]] = {"y": [], **{k: [] for k in conds}}
    for b in x.split(8):
        y = batched(f, b).flatten(2)  # [B, D, V]
        idx = torch.stack([torch.randperm(y.shape[2], generator=rng)[:per_image] for _ in range(len(b))])  # [B, k]
        out["y"].append(_pick(y, idx))
        for k, cond in conds.items():
            out[k].append(_pick(cond(b).flatten(2), idx))
    return {k: torch.cat(v) for k, v in out.items()}


def _sq_error(ae, x: torch.Tensor) -> torch.Tensor:
    """The autoencoder's squared error per voxel: ``[B, 1, *S]`` → ``[B, *S]``."""
    return (ae(x) - x).pow(2)[:, 0]


def _pick(z: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``z [B, D, V]`` at voxels ``idx [B, k]`` → ``[B · k, D]``."""
    return z.gather(2, idx[:, None].expand(-1, z.shape[1], -1)).movedim(1, -1).reshape(idx.numel(), z.shape[1])


def _scores(score: torch.Tensor, truth: torch.Tensor, region: torch.Tensor) -> dict[str, float]:
    """Voxel AUROC and AUPRC of ``score`` against ``truth`` over ``region`` (all ``[N, *S]``)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    s, t = score[region].numpy(), truth[region].numpy()
    return {"auroc": float(roc_auc_score(t, s)), "auprc": float(average_precision_score(t, s))}


def _shown(x: torch.Tensor, truth: torch.Tensor, region: torch.Tensor, maps: dict) -> dict[str, Any]:
    """The first ``SHOWN`` test images as 2D pictures (volumes: the axial slice with the most anomaly voxels): input,
    true mask, scored region and each method's map, with per-image AUROC over the image's scored region."""
    from sklearn.metrics import roc_auc_score

    out: dict[str, Any] = {"image": [], "truth": [], "region": [], "where": [], "maps": {m: [] for m in maps}}
    out["auroc"] = {m: [] for m in maps}
    for i in range(min(SHOWN, len(x))):
        sl: tuple = (i,)
        if x.dim() == 4:  # volumes: the slice with the most anomaly voxels
            z = int(truth[i].flatten(1).sum(1).argmax())
            sl = (i, z)
            out["where"].append(f"slice {z}")
        else:
            out["where"].append(f"image {i}")
        out["image"].append(np.round(x[sl].numpy(), 3).tolist())
        out["truth"].append(truth[sl].int().tolist())
        out["region"].append(region[sl].int().tolist())
        for m, s in maps.items():
            out["maps"][m].append(np.round(s[sl].numpy(), 3).tolist())
            inside = region[i]
            out["auroc"][m].append(float(roc_auc_score(truth[i][inside].numpy(), s[i][inside].numpy())))
    return out
