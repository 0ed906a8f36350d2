"""extras.scene.foremamba3d: Fore-Mamba3D, a voxel encoder that runs Mamba over the top-scored (foreground)
voxels only, with regional-to-global sliding windows (RGSW) and semantic-assisted state-space fusion (SASF),
against full-sequence bidirectional Mamba over every non-empty voxel (LION-style) and a naive foreground-only
Mamba, on seeded LiDAR-like scenes (``scenes.py``, cached per seed in the run folder): BEV centre-heatmap AP,
analytic encoder FLOPs and measured wall time."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.nets import timed, warmup_cosine
from agentkit.extras.scene.foremamba3d.config import ForeMambaConfig
from agentkit.extras.scene.foremamba3d.model import VoxelEncoder, centernet_focal, focal_loss, serial_orders, windows
from agentkit.extras.scene.foremamba3d.scenes import CLASSES, scene
from agentkit.extras.sweep import stage, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "foremamba3d": "Fore-Mamba3D (top 20 % + RGSW + SASF)",
    "naive": "naive foreground-only Mamba",
    "lion": "full sequence (LION-style)",
    "rgsw": "top 20 % + RGSW (no SASF)",
}
TOP_K = 40  # detections per class and scene


class ForeMambaRecipe(Recipe[ForeMambaConfig]):
    name = "extras.scene.foremamba3d"
    config_cls = ForeMambaConfig
    description = "Fore-Mamba3D: foreground-only Mamba voxel encoding vs full-sequence (LION) and naive fg-only"

    def setup(self) -> None:
        data.require("mambapy", "scene", "extras.scene.foremamba3d needs mambapy")

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every method)")
        res = {lab: per for lab, per in grid.nested(()).items() if lab in LABELS.values()}
        quality = ["mAP"] + [f"AP_{k}" for k in CLASSES] + ["fg_recall"]
        cost = ["tokens", "mflops", "ms_per_scene", "reach90", "val_mAP"]
        bases = [LABELS[m] for m in ("lion", "naive") if m in c.methods]
        self.ctx.add_section(
            f"{c.seeds} seeds",
            f"{c.train_scenes} training, {c.val_scenes} validation and {c.test_scenes} test scenes per seed "
            f"({c.beams} beams × {c.azimuths} rays, {c.grid}² BEV cells of {c.voxel} m × {c.height} levels). "
            f"AP: BEV centre detection (heatmap peaks, top {TOP_K} per class and scene) matched to the true centres "
            f"within {', '.join(f'{m:g}' for m in c.match_m)} m and averaged over those, then over classes (mAP); "
            f"fg_recall: the share of car and pedestrian voxels among the encoded ones (1 when every voxel is); "
            f"{c.steps} steps each, the checkpoint with the best validation mAP kept.\n\n"
            + report.table(res, quality)
            + "".join("\n\n" + report.paired(res, b, quality) for b in bases)
            + "\n\nThe scenes (training scenes, mean over seeds): voxels, non-empty voxels a scene; background_share, "
            "the share of them that are ground or clutter; targets, cars and pedestrians with at least one point.\n\n"
            + report.table(
                grid.nested((), ["voxels", "background_share", "targets"]),
                ["voxels", "background_share", "targets"],
                label="scenes",
            )
            + "\n\nCost: tokens, voxels encoded per scene (mean); mflops, the encoder's analytic FLOPs per scene (10⁶) "
            "(embedding and scoring of every voxel, then the Mamba layers and SASF over the encoded ones; the "
            f"detection head, the same for all, left out); ms_per_scene, measured wall time of the whole network "
            f"on one test scene ({c.device}, median over the test scenes); reach90, how far along the scan the first "
            "Mamba layer's scans reach: the sequence distance |i − j| within which 90 % of ‖∂y_i/∂x_j‖ lies (the "
            "two scans' output without the residual skip; 16 outputs i of the first test scene, the layer as trained, "
            "its windows included).\n\n" + report.table(res, cost, digits=2),
        )
        self._plot(grid, res)
        return report.means(res, ["mAP", "mflops"])

    # ---- data --------------------------------------------------------------------------------------------------
    def _scene(self, seed: int) -> dict[str, np.ndarray]:
        c = self.config
        return scene(
            seed,
            c.grid,
            c.voxel,
            c.height,
            c.beams,
            c.azimuths,
            cars=tuple(c.cars),
            pedestrians=tuple(c.pedestrians),
            clutter=c.clutter,
        )

    def _scenes(self, seed: int) -> dict[str, list[dict[str, np.ndarray]]]:
        c = self.config
        out = {}
        for split, n, base in (
            ("train", c.train_scenes, 0),
            ("val", c.val_scenes, 500_000),
            ("test", c.test_scenes, 700_000),
        ):
            out[split] = [
                self._scene(1_000_000 * seed + base + i)
                for i in self.ctx.progress(range(n), f"{split} scenes (seed {seed})")
            ]
        return out

    def _targets(self, s: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """The head's targets at stride 2: Gaussian centre heatmaps ``[2, G/2, G/2]`` (σ 1 cell for cars, 0.6 for
        pedestrians, peak 1 at the centre's cell), the centres' cells and their sub-cell offsets."""
        c = self.config
        g, cell, extent = c.grid // 2, 2 * c.voxel, c.grid * c.voxel / 2
        heat = torch.zeros(len(CLASSES), g, g)
        uv = (torch.from_numpy(s["centres"]) + extent) / cell  # x → column, y → row
        ij = uv.floor().long().clamp(0, g - 1)
        ys, xs = torch.meshgrid(torch.arange(g), torch.arange(g), indexing="ij")
        for (col, row), k in zip(ij.tolist(), s["classes"].tolist()):
            sigma = 1.0 if k == 1 else 0.6
            gauss = torch.exp(-((xs - col) ** 2 + (ys - row) ** 2) / (2 * sigma**2))
            heat[k - 1] = torch.maximum(heat[k - 1], gauss)
        return {"heat": heat, "cells": ij, "offsets": uv - ij.float()}

    # ---- one seed ----------------------------------------------------------------------------------------------
    def _net(self, method: str) -> VoxelEncoder:
        c = self.config
        return VoxelEncoder(
            (c.height, c.grid, c.grid),
            c.dim,
            c.layers,
            keep=1.0 if method == "lion" else c.keep,
            windows=c.rgsw_windows if method in ("foremamba3d", "rgsw") else [0] * c.layers,
            sasf=method == "foremamba3d",
            d_state=c.d_state,
        ).to(c.device)

    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        scenes = stage(self.ctx, f"seed{seed}-scenes", lambda: self._scenes(seed))
        out: dict[str, Any] = {}
        shown: dict[str, Any] = {"voxels": scenes["test"][0]["coords"][:, 1:].tolist()}
        first = scenes["test"][0]
        shown["centres"], shown["classes"] = first["centres"].tolist(), first["classes"].tolist()
        targets = [self._targets(s) for s in scenes["train"]]  # once per seed, for every method
        for method in c.methods:
            fit = stage(self.ctx, f"seed{seed}-{method}", lambda m=method: self._fit(m, scenes, targets, seed))
            net = self._net(method)
            net.load_state_dict(fit["state"])
            net.eval()
            row = self._evaluate(net, scenes["test"])
            row["val_mAP"] = fit["val_mAP"]
            with torch.no_grad():
                o = net(*self._inputs(first))
            reach, curve = attenuation(net, *self._inputs(first), o["kept"])
            row["reach90"] = reach
            out[LABELS[method]] = row
            shown[LABELS[method]] = {
                "kept": o["kept"].cpu().numpy().astype(int).tolist(),
                "heat": np.round(torch.sigmoid(o["heatmap"]).amax(0).cpu().numpy(), 2).tolist(),
                "losses": fit["losses"],
                "attenuation": curve,
            }
        stats = [(s["labels"] == 0).mean() for s in scenes["train"]]
        out["scenes"] = {
            "voxels": float(np.mean([len(s["labels"]) for s in scenes["train"]])),
            "background_share": float(np.mean(stats)),
            "targets": float(np.mean([len(s["classes"]) for s in scenes["train"]])),
        }
        out["_plots"] = {"first": shown}
        return out

    def _inputs(self, s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        dev = self.config.device
        return torch.from_numpy(s["coords"]).to(dev), torch.from_numpy(s["features"]).to(dev)

    def _fit(self, method: str, scenes, targets: list[dict[str, torch.Tensor]], seed: int) -> dict[str, Any]:
        c = self.config
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        net = self._net(method)
        opt = torch.optim.AdamW(net.parameters(), lr=c.lr, weight_decay=0.01)
        sched = warmup_cosine(opt, c.steps)
        every = max(1, c.steps // c.evals)
        losses, best = [], (-1.0, None)
        for step in self.ctx.progress(range(c.steps), f"{LABELS[method]} (seed {seed})"):
            i = int(torch.randint(len(scenes["train"]), (1,), generator=g))
            s, t = scenes["train"][i], targets[i]
            o = net(*self._inputs(s))
            loss = self._loss(net, o, s, t)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            if (step + 1) % every == 0 or step + 1 == c.steps:
                net.eval()
                val = self._mean_ap(net, scenes["val"])["mAP"]
                net.train()
                if val > best[0]:
                    best = (val, {k: v.detach().cpu().clone() for k, v in net.state_dict().items()})
        return {"state": best[1], "val_mAP": best[0], "losses": report.thin(losses)}

    def _loss(self, net: VoxelEncoder, o, s, t) -> torch.Tensor:
        c = self.config
        dev = c.device
        loss = centernet_focal(o["heatmap"], t["heat"].to(dev))
        if len(t["cells"]):
            col, row = t["cells"][:, 0].to(dev), t["cells"][:, 1].to(dev)
            loss = loss + F.l1_loss(o["offset"][:, row, col].t(), t["offsets"].to(dev))
        labels = torch.from_numpy(s["labels"]).to(dev)
        if net.keep < 1:
            loss = loss + c.score_weight * focal_loss(o["score"], (labels > 0).float())
        if o["semantic"] is not None:
            loss = loss + c.semantic_weight * F.cross_entropy(o["semantic"], labels[o["semantic_rows"]])
        return loss

    # ---- evaluation --------------------------------------------------------------------------------------------
    @torch.no_grad()
    def _detect(self, net: VoxelEncoder, s) -> list[tuple[int, float, float, float]]:
        """(class, score, x, y) of the heatmap's local maxima (3 × 3), the top ``TOP_K`` per class."""
        c = self.config
        o = net(*self._inputs(s))
        heat = torch.sigmoid(o["heatmap"])
        peaks = heat * (F.max_pool2d(heat[None], 3, 1, 1)[0] == heat)
        cell, extent = 2 * c.voxel, c.grid * c.voxel / 2
        dets = []
        for k in range(len(CLASSES)):
            flat = peaks[k].flatten()
            top = torch.topk(flat, min(TOP_K, len(flat)))
            rows, cols = top.indices // peaks.shape[-1], top.indices % peaks.shape[-1]
            off = o["offset"][:, rows, cols]
            xs = (cols.float() + off[0]) * cell - extent
            ys = (rows.float() + off[1]) * cell - extent
            dets += [(k + 1, float(p), float(x), float(y)) for p, x, y in zip(top.values, xs, ys)]
        return dets

    def _mean_ap(self, net: VoxelEncoder, scenes) -> dict[str, float]:
        """AP per class averaged over the distance thresholds, and their mean (mAP)."""
        dets = [self._detect(net, s) for s in scenes]
        out = {}
        for k, name in enumerate(CLASSES, start=1):
            per_scene = [[d[1:] for d in ds if d[0] == k] for ds in dets]
            gts = [s["centres"][s["classes"] == k] for s in scenes]
            out[f"AP_{name}"] = float(np.mean([average_precision(per_scene, gts, m) for m in self.config.match_m]))
        out["mAP"] = float(np.mean([out[f"AP_{n}"] for n in CLASSES]))
        return out

    @torch.no_grad()
    def _evaluate(self, net: VoxelEncoder, scenes) -> dict[str, float]:
        row = self._mean_ap(net, scenes)
        recall, tokens, flops, ms = [], [], [], []
        for s in scenes:
            inputs = self._inputs(s)
            o, seconds = timed(lambda inputs=inputs: net(*inputs), inputs[0].is_cuda)
            ms.append(seconds * 1000)
            fg = torch.from_numpy(s["labels"] > 0).to(o["kept"].device)
            recall.append(float((o["kept"] & fg).sum() / fg.sum().clamp(min=1)))
            tokens.append(int(o["tokens"]))
            flops.append(net.encoder_flops(len(s["labels"]), int(o["tokens"])))
        row.update(
            fg_recall=float(np.mean(recall)),
            tokens=float(np.mean(tokens)),
            mflops=float(np.mean(flops)) / 1e6,
            ms_per_scene=float(np.median(ms)),
        )
        return row

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, res) -> None:
        c = self.config
        plt = pyplot()
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        firsts = [r.get("_plots", {}).get("first", {}) for r in grid.raw[()]]
        for lab in res:
            curves = [f[lab]["attenuation"] for f in firsts if lab in f]
            if curves:
                width = min(len(cv) for cv in curves)
                report.curve(
                    ax2, [2**b - 1 for b in range(width)], [[cv[b] for cv in curves] for b in range(width)], lab
                )
        ax2.set_xscale("symlog", linthresh=1)
        ax2.set_yscale("log")
        ax2.set_xlabel("sequence distance |i − j| (bins 2^b − 1 … 2^(b+1) − 2)")
        ax2.set_ylabel("share of ‖∂y_i/∂x_j‖ (first layer's scans)")
        for lab, per in res.items():
            x, y = report.mean_std(per["mflops"]), report.mean_std(per["mAP"])
            ax.errorbar([x[0]], [y[0]], xerr=[x[1]], yerr=[y[1]], marker="o", capsize=3, label=lab)
        ax.set_xlabel("encoder MFLOPs per scene (analytic)")
        ax.set_ylabel("BEV centre mAP")
        ax.set_xscale("log")
        ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "ap-vs-flops",
            "Left: BEV centre mAP against encoder FLOPs. Right: how the first layer's response decays along the scan "
            "(the share of the input gradient at each distance). Mean ± std over seeds",
        )
        first = grid.raw[()][0].get("_plots", {}).get("first", {})
        methods = [lab for lab in res if lab in first]
        if methods:
            extent = c.grid * c.voxel / 2
            vox = np.asarray(first["voxels"], dtype=float).reshape(-1, 2)
            xy = (vox[:, ::-1] + 0.5) * c.voxel - extent  # (row, col) → (x, y) metres
            cen = np.asarray(first["centres"], dtype=float).reshape(-1, 2)
            cls = np.asarray(first["classes"])
            fig, axes = plt.subplots(1, len(methods), figsize=(4.6 * len(methods), 4.6), squeeze=False)
            for ax, lab in zip(axes[0], methods):
                kept = np.asarray(first[lab]["kept"], dtype=bool)
                ax.imshow(
                    np.asarray(first[lab]["heat"]),
                    origin="lower",
                    extent=(-extent, extent, -extent, extent),
                    cmap="magma",
                    vmin=0,
                    vmax=1,
                )
                ax.scatter(xy[~kept, 0], xy[~kept, 1], s=0.3, c="0.55", label="dropped voxels")
                ax.scatter(xy[kept, 0], xy[kept, 1], s=0.6, c="tab:cyan", label="encoded voxels")
                for k, marker, colour in ((1, "s", "lime"), (2, "o", "yellow")):
                    pts = cen[cls == k]
                    ax.scatter(pts[:, 0], pts[:, 1], marker=marker, s=40, facecolors="none", edgecolors=colour)
                ax.set_title(lab, fontsize=8)
                ax.set_xticks([]), ax.set_yticks([])
            axes[0, 0].legend(fontsize=6, loc="lower left", markerscale=8)
            fig.tight_layout()
            self.ctx.save_plot(
                fig,
                "bev",
                "Seed 0, the first test scene: the predicted centre heatmap (max over classes), the voxels each "
                "method encoded (cyan) and dropped (grey), true cars (green squares) and pedestrians (yellow circles)",
            )

    def evaluate(self) -> dict[str, Any]:
        return {}


def attenuation(net: VoxelEncoder, coords: torch.Tensor, features: torch.Tensor, kept: torch.Tensor, outputs: int = 16):
    """How fast the first Mamba layer's response decays along its scan over the voxels ``kept`` (the mask the
    network's forward returned): for ``outputs`` positions i spread over the sequence, ‖∂y_i/∂x_j‖ for every input
    j, binned by |i − j| (powers of two). Returns (the distance within which 90 % of the gradient mass lies, the mean
    normalised mass per bin)."""
    kept = kept.nonzero().squeeze(1)
    x = net.embedding(coords, features)[kept].detach()
    order = serial_orders(coords[kept], net.grid[1])[0]
    seq = x[order].clone().requires_grad_(True)
    spans = windows(len(seq), net.spans[0], 0)
    bins = int(np.ceil(np.log2(max(len(seq), 2)))) + 1
    mass, reach = np.zeros(bins), []
    for i in np.linspace(0, len(seq) - 1, outputs).round().astype(int):
        (g,) = torch.autograd.grad((net.layers[0](seq, spans) - seq)[i].sum(), seq)  # the scan, not the skip
        norm = g.norm(dim=1).detach().cpu().numpy()
        dist = np.abs(np.arange(len(seq)) - i)
        cum = np.cumsum(np.bincount(dist, weights=norm)) / max(norm.sum(), 1e-30)
        reach.append(int(np.searchsorted(cum, 0.9)))
        per = np.bincount(np.floor(np.log2(dist + 1)).astype(int), weights=norm, minlength=bins)[:bins]
        mass += per / max(per.sum(), 1e-30)
    return float(np.mean(reach)), (mass / outputs).round(5).tolist()


def average_precision(dets: list[list[tuple[float, float, float]]], gts: list[np.ndarray], dist: float) -> float:
    """AP of scored centre detections (per scene: ``(score, x, y)`` tuples) against true centres (per scene:
    ``[G, 2]``): greedy by score, a detection counts when an unmatched true centre of its scene is within ``dist``
    metres; the all-point interpolated area under precision–recall (VOC). 0 when there is no true centre.

    >>> average_precision([[(0.9, 0.0, 0.0), (0.8, 5.0, 5.0)]], [np.array([[0.1, 0.0]])], 0.5)
    1.0
    >>> average_precision([[(0.9, 5.0, 5.0), (0.8, 0.0, 0.0)]], [np.array([[0.1, 0.0]])], 0.5)
    0.5
    """
    total = sum(len(g) for g in gts)
    if total == 0:
        return 0.0
    flat = sorted(((d[0], i, d[1], d[2]) for i, ds in enumerate(dets) for d in ds), key=lambda r: -r[0])
    used = [np.zeros(len(g), dtype=bool) for g in gts]
    tp = np.zeros(len(flat))
    for n, (_, i, x, y) in enumerate(flat):
        g = gts[i]
        if not len(g):
            continue
        dd = np.hypot(g[:, 0] - x, g[:, 1] - y)
        dd[used[i]] = np.inf
        j = int(dd.argmin())
        if dd[j] <= dist:
            used[i][j] = True
            tp[n] = 1
    ctp = np.cumsum(tp)
    recall = ctp / total
    precision = ctp / np.arange(1, len(flat) + 1)
    r = np.concatenate([[0.0], recall, [recall[-1] if len(recall) else 0.0]])
    p = np.concatenate([[1.0], precision, [0.0]])
    p = np.maximum.accumulate(p[::-1])[::-1]
    return float(np.sum((r[1:] - r[:-1]) * p[1:]))
