"""extras.scene.upnet: uncertainty maps for active view selection (UPNet / PUN). A ViT maps one image of an object
to what each of 48 view-relative HEALPix directions would add to the reconstruction; the maps of the views taken
so far are rotated into the object frame, interpolated to the candidates, filtered and multiplied to choose the
next view. Compared with random, farthest-view and reconstruction-based selection, with greedy oracle selection as
the upper bound, on seeded SDF objects (``extras.data.sdf_object``) ray-marched at 64², reconstructed by a visual
hull on a 32³ grid, with categories held out."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.nets import ViT, batched, warmup_cosine
from agentkit.extras.scene.upnet.config import UPNetConfig
from agentkit.extras.scene.upnet.model import (
    Scene,
    episode,
    farthest,
    from_maps,
    normalise,
    oracle,
    random_strategy,
    reconstruction,
    target_map,
)
from agentkit.extras.sweep import stage, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "upnet": "UPNet",
    "mean_map": "mean map (no image)",
    "random": "random",
    "farthest": "farthest view",
    "reconstruction": "reconstruction-based",
    "oracle": "oracle greedy (upper bound)",
}
SPLITS = {
    "novel": "held-out categories",
    "seen": "seen categories, new objects",
    "meshes": "real meshes (pybullet_data)",
}


class UPNetRecipe(Recipe[UPNetConfig]):
    name = "extras.scene.upnet"
    config_cls = UPNetConfig
    description = "UPNet: next-best-view from predicted uncertainty maps vs random / farthest / reconstruction-based"

    def setup(self) -> None:
        if self.config.meshes:
            data.require("pybullet_data", "pybullet", "the meshes option reads pybullet's data files")

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every method)")
        out: dict[str, Any] = {}
        counts = list(range(1, c.max_views + 1))
        metrics = [f"iou@{k}" for k in sorted({2, 3, 5, c.max_views}) if k <= c.max_views] + ["auc", "select_ms"]
        curves: dict[str, report.Results] = {}
        for split, words in SPLITS.items():
            if split == "meshes" and not c.meshes:
                continue
            res = {
                lab.split("|", 1)[1]: per
                for lab, per in grid.nested((), metrics + ["map_spearman"]).items()
                if lab.startswith(split + "|")
            }
            curves[split] = {
                lab.split("|", 1)[1]: per
                for lab, per in grid.nested((), [f"iou@{k}" for k in counts]).items()
                if lab.startswith(split + "|")
            }
            self.ctx.add_section(
                f"{words}: {c.seeds} seeds",
                f"Visual-hull IoU (voxels³ = {c.voxels}³) after k views, each episode starting from the same random "
                "candidate for every method; auc: the mean IoU over 2 … "
                f"{c.max_views} views; select_ms: the time one pick takes (UPNet's includes its ViT on the new view). "
                "map_spearman: the rank correlation of the map (UPNet's prediction, or the mean training map) with the "
                "true gains from the first view of each test object's first episode, averaged over objects.\n\n"
                + report.table(res, metrics + ["map_spearman"])
                + "\n\n"
                + report.paired(res, LABELS["random"], ["iou@3", "iou@5", "auc"])
                + "\n\n"
                + report.paired(res, LABELS["upnet"], ["iou@3", "iou@5", "auc"]),
            )
            out |= report.means(res, ["iou@3", "auc", "select_ms", "map_spearman"], f"{split}/")
        self._plot(grid, curves, counts)
        return out

    # ---- the frozen stage: training images and their target maps --------------------------------------------
    def _objects(self, categories: list[str], per: int, seed: int, salt: int) -> list:
        """``per`` objects of each category, seeded by (seed, salt, category, index)."""
        return [
            data.sdf_object(
                cat,
                seed=int(np.random.SeedSequence([seed, salt, data.SDF_CATEGORIES.index(cat), i]).generate_state(1)[0]),
            )
            for cat in categories
            for i in range(per)
        ]

    def _targets(self, categories: list[str], per: int, views: int, seed: int, salt: int, what: str) -> dict:
        """Images from random views of ``per`` objects of each category, and their normalised target maps."""
        c = self.config
        rng = np.random.default_rng([seed, salt])
        dirs = data.healpix_directions(2)
        images, maps = [], []
        objs = self._objects(categories, per, seed, salt)
        for obj in self.ctx.progress(objs, f"{what} (seed {seed})"):
            for v in data.sphere(views, seed=int(rng.integers(2**31))):
                img, gains = target_map(obj, v, dirs, c.image_size, c.voxels)
                images.append(img)
                maps.append(normalise(gains))
        return {"images": torch.stack(images)[:, None], "maps": torch.stack(maps)}

    def _fit(self, tr: dict, va: dict, seed: int) -> dict[str, Any]:
        """AdamW on the MSE of sigmoid(ViT(image)) against the target map; keeps the best validation state."""
        c = self.config
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        net = ViT(1, c.image_size, c.patch, c.dim, c.depth, c.heads, out=48)
        opt = torch.optim.AdamW(net.parameters(), lr=c.lr, weight_decay=0.05)
        sched = warmup_cosine(opt, c.steps)
        best, losses, val_curve = (float("inf"), None), [], []
        for step in self.ctx.progress(range(c.steps), f"UPNet ViT (seed {seed})"):
            i = torch.randint(len(tr["images"]), (min(c.batch, len(tr["images"])),), generator=g)
            loss = (torch.sigmoid(net(tr["images"][i])) - tr["maps"][i]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if (step + 1) % c.eval_every == 0 or step + 1 == c.steps:
                v = float((torch.sigmoid(batched(net, va["images"], batch=256)) - va["maps"]).pow(2).mean())
                val_curve.append([step + 1, v])
                if v < best[0]:
                    best = (v, {k: t.clone() for k, t in net.state_dict().items()})
        return {"state": best[1], "val_mse": best[0], "losses": report.thin(losses), "val_curve": val_curve}

    # ---- one seed -------------------------------------------------------------------------------------------
    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        seen = [k for k in data.SDF_CATEGORIES if k not in c.held_out]
        tr = stage(
            self.ctx,
            f"seed{seed}-train",
            lambda: self._targets(seen, c.train_objects, c.views_per_object, seed, 1, "training targets"),
        )
        va = stage(
            self.ctx,
            f"seed{seed}-val",
            lambda: self._targets(seen, c.val_objects, c.views_per_object, seed, 2, "validation targets"),
        )
        fitted = stage(self.ctx, f"seed{seed}-vit", lambda: self._fit(tr, va, seed))
        net = ViT(1, c.image_size, c.patch, c.dim, c.depth, c.heads, out=48)
        net.load_state_dict(fitted["state"])
        net.eval()
        mean_map = tr["maps"].mean(0).numpy()
        cands = data.healpix_directions(2)
        out: dict[str, Any] = {"_train": {"losses": fitted["losses"], "val_curve": fitted["val_curve"]}}
        shown: dict[str, Any] = {}
        for split, count, scenes in self._test_scenes(seen, seed):
            per_method: dict[str, list[list[float]]] = {m: [] for m in c.methods}
            times: dict[str, list[float]] = {m: [] for m in c.methods}
            rho = []
            rng = np.random.default_rng([seed, 4])
            for j, (shape, scene) in enumerate(self.ctx.progress(scenes, f"{split} test objects (seed {seed})", count)):
                starts = rng.choice(len(cands), c.mesh_starts if split == "meshes" else 1, replace=False)
                for e, start in enumerate(int(s) for s in starts):
                    cache: dict[int, np.ndarray] = {}

                    def predict(taken: list[int], scene=scene, cache=cache) -> list[np.ndarray]:
                        for t in taken:
                            if t not in cache:
                                with torch.no_grad():
                                    cache[t] = torch.sigmoid(net(scene.images[t][None, None]))[0].numpy()
                        return [cache[t] for t in taken]

                    picks = {
                        "upnet": from_maps(predict, c.radius_deg, c.threshold),
                        "mean_map": from_maps(lambda taken: [mean_map] * len(taken), c.radius_deg, c.threshold),
                        "random": random_strategy(np.random.default_rng([seed, 5, j, e])),
                        "farthest": farthest,
                        "reconstruction": reconstruction,
                        "oracle": oracle,
                    }
                    chosen = {}
                    for m in c.methods:
                        ious, ms, chosen[LABELS[m]] = episode(scene, picks[m], start, c.max_views)
                        per_method[m].append(ious)
                        times[m].extend(ms)
                    if e == 0:  # the true map of the first start (map directions are HEALPix's too)
                        _, truth = target_map(shape, cands[start], cands, c.image_size, c.voxels, scene.occ)
                        rho.append((_spearman(predict([start])[0], truth.numpy()), _spearman(mean_map, truth.numpy())))
                    if seed == 0 and j == 0 and e == 0:
                        shown[split] = {
                            "category": _name(shape),
                            "taken": chosen,
                            "image": np.round(scene.images[start].numpy(), 3).tolist(),
                        }
            for m in c.methods:
                curve = np.mean(per_method[m], 0)
                row = {f"iou@{k + 1}": float(v) for k, v in enumerate(curve)}
                row["auc"] = float(curve[1:].mean())
                row["select_ms"] = float(np.mean(times[m]))
                if m in ("upnet", "mean_map"):
                    row["map_spearman"] = float(np.nanmean([r[m == "mean_map"] for r in rho]))
                out[f"{split}|{LABELS[m]}"] = row
        if shown:
            out["_shown"] = shown
        return out

    def _test_scenes(self, seen: list[str], seed: int):
        """``(split, count, (shape, Scene) …)`` for the held-out categories, the seen ones (new objects) and the real
        meshes. A mesh's scene is rendered once for every seed (``state/stages/mesh-<name>.pt``)."""
        c = self.config
        cands = data.healpix_directions(2)
        for split, cats in (("novel", list(c.held_out)), ("seen", seen)):
            objs = self._objects(cats, c.test_objects, seed, 3)
            yield split, len(objs), ((o, Scene(o, cands, c.image_size, c.voxels)) for o in objs)
        if c.meshes:
            meshes = [data.pybullet_mesh(m) for m in c.meshes]
            yield (
                "meshes",
                len(meshes),
                (
                    (m, stage(self.ctx, f"mesh-{m.name}", lambda m=m: Scene(m, cands, c.image_size, c.voxels)))
                    for m in meshes
                ),
            )

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, curves: dict[str, report.Results], counts: list[int]) -> None:
        plt = pyplot()
        fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 4), squeeze=False)
        for ax, (split, res) in zip(axes[0], curves.items()):
            for lab, per in res.items():
                report.curve(ax, counts, [per[f"iou@{k}"] for k in counts], lab, ls="--" if "oracle" in lab else "-")
            ax.set_xlabel("views acquired")
            ax.set_ylabel("visual-hull IoU")
            ax.set_title(SPLITS[split])
            ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "iou-vs-views", "Hull IoU against the number of views, mean ± std over seeds")
        shown = grid.raw[()][0].get("_shown") or {}
        cands = data.healpix_directions(2)
        for split, s in shown.items():
            methods = list(s["taken"])
            fig = plt.figure(figsize=(3.2 * (len(methods) + 1), 3.4))
            ax = fig.add_subplot(1, len(methods) + 1, 1)
            ax.imshow(s["image"], cmap="gray")
            ax.set_title(f"{s['category']}: first view", fontsize=8)
            ax.set_xticks([]), ax.set_yticks([])
            for i, m in enumerate(methods):
                ax = fig.add_subplot(1, len(methods) + 1, i + 2, projection="3d")
                ax.scatter(*cands.T, s=6, c="lightgrey")
                t = s["taken"][m]
                p = cands[t]
                ax.plot(*p.T, c="tab:blue", lw=0.8)
                ax.scatter(*p.T, c=np.arange(len(t)), cmap="viridis", s=28, depthshade=False)
                ax.scatter(*p[:1].T, c="r", s=50, marker="*")
                ax.set_title(m, fontsize=8)
                ax.set_box_aspect((1, 1, 1))
                ax.set_axis_off()
            fig.tight_layout()
            self.ctx.save_plot(
                fig,
                f"views-{split}",
                f"{SPLITS[split]} (seed 0, first test object): the views each method took on the sphere of 48 "
                "candidates, the start as a red star, later views lighter",
            )
        train = grid.raw[()][0].get("_train")
        if train:
            fig, ax = plt.subplots(figsize=(5, 3.4))
            ax.plot(np.linspace(0, self.config.steps, len(train["losses"])), train["losses"], label="train MSE")
            ax.plot(*np.array(train["val_curve"]).T, marker="o", label="validation MSE")
            ax.set_xlabel("step")
            ax.legend()
            fig.tight_layout()
            self.ctx.save_plot(fig, "training", "UPNet's ViT: training and validation MSE of the maps (seed 0)")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _name(shape) -> str:
    return shape.category if hasattr(shape, "category") else shape.name


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)
