"""extras.vision.relayformer: manipulation localisation at any resolution (RelayFormer). The input is cut into fixed
overlapping tiles, never resized; each tile's relay (GLR) tokens carry context across tiles and frames through a
global attention step with 4D RoPE; a gated mask decoder reads the re-assembled feature map. Compared with 2, 1 and
0 relay tokens and with the same network on inputs resized to 128², on splices, copy-moves and inpaints of the
photographs scikit-image and scikit-learn ship, whose traces (noise, JPEG, resampling) differ from a host level each
image draws at random: only the other tiles say what is foreign."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.nets import warmup_cosine
from agentkit.extras.sweep import stage, sweep
from agentkit.extras.vision.relayformer.config import RelayFormerConfig
from agentkit.extras.vision.relayformer.model import RelayFormer, relay_loss
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

MEAN, STD = 0.5, 0.25  # input normalisation
SHOWN = 72  # side (px) of the pictures kept for the report


class RelayFormerRecipe(Recipe[RelayFormerConfig]):
    name = "extras.vision.relayformer"
    config_cls = RelayFormerConfig
    description = "RelayFormer: tiled manipulation localisation with relay tokens vs fewer relays and resizing"

    def setup(self) -> None:
        data.require("skimage", "vision", "extras.vision.relayformer's photographs need scikit-image")

    # ---- what runs --------------------------------------------------------------------------------------------
    def variants(self) -> list[tuple[str, int, int]]:
        """(label, relay tokens, resize side or 0) per model, in report order."""
        c = self.config
        out = [(f"{k} relay token{'' if k == 1 else 's'}", k, 0) for k in c.relay_tokens]
        if c.resize_to:
            out.append((f"resized to {c.resize_to}² ({c.relay_tokens[0]} relays)", c.relay_tokens[0], c.resize_to))
        return out

    def bins(self) -> list[str]:
        return [f"{lo}-{hi}px" for lo, hi in self.config.test_sizes]

    def metrics(self) -> list[str]:
        c = self.config
        out = [f"{m}@{b}" for m in ("f1", "auc") for b in self.bins()]
        return out + (["video_f1", "frame_f1"] if c.video_clips else [])

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every model)")
        labels = [v[0] for v in self.variants()]
        flops = [f"gflops@{b}" for b in self.bins()]
        res = {lab: per for lab, per in grid.nested((), self.metrics() + flops + ["val_f1"]).items() if lab in labels}
        f1s, aucs = [f"f1@{b}" for b in self.bins()], [f"auc@{b}" for b in self.bins()]
        video = (
            "video_f1: mean pixel-F1 over the frames of "
            f"{c.video_clips} test clips of {c.video_frames} frames, all frames' relay tokens attending to each other "
            "(4D RoPE's frame axis); frame_f1: the same model on each frame alone. "
            if c.video_clips
            else ""
        )
        self.ctx.add_section(
            f"{c.seeds} seeds",
            f"Test forgeries of {', '.join(c.test_sources)} ({c.test_per_size} per resolution bin: both sides drawn "
            f"from the bin's range), training on {', '.join(c.train_sources)} ({c.train_pool} forgeries of "
            f"{c.train_size[0]}–{c.train_size[1]} px), model selection on {', '.join(c.val_sources)}. f1@bin: "
            "pixel-F1 at threshold 0.5, per image, averaged (the IMDL protocol); auc@bin: per-image pixel AUC. "
            + video
            + "gflops@bin: forward FLOPs per image (torch's FlopCounterMode), mean over the bin's first 4 test "
            "images. val_f1: the kept state's validation F1.\n\n"
            + report.table(res, f1s + aucs)
            + "\n\n"
            + (report.table(res, ["video_f1", "frame_f1"]) + "\n\n" if c.video_clips else "")
            + report.table(res, flops + ["val_f1"], digits=2)
            + "\n\n"
            + report.paired(res, labels[0], f1s + aucs),
        )
        self._plot(grid, res)
        return report.means(res, f1s + aucs)

    # ---- data -------------------------------------------------------------------------------------------------
    def _forgeries(self, sources, sizes: list[tuple[int, int]], frames: list[int], seed: int) -> list[dict]:
        """Forgeries of ``sources`` with the given sides and frame counts: ``{"x": uint8 [T, 3, H, W], "mask":
        bool [T, 1, H, W], "kind", "trace"}``."""
        out = []
        for i, ((h, w), t) in enumerate(zip(sizes, frames)):
            f = data.forgery(sources, h, w, seed=seed * 1_000_003 + i, frames=t)
            out.append(
                {
                    "x": torch.from_numpy(np.round(f.frames * 255).astype(np.uint8)).permute(0, 3, 1, 2),
                    "mask": torch.from_numpy(f.mask)[:, None],
                    "kind": f.kind,
                    "trace": f.trace,
                }
            )
        return out

    def _sides(self, rng: np.random.Generator, n: int, lo: int, hi: int) -> list[tuple[int, int]]:
        return [tuple(int(v) for v in rng.integers(lo, hi + 1, 2)) for _ in range(n)]

    def _data(self, seed: int) -> dict[str, list[dict]]:
        c = self.config
        rng = np.random.default_rng([seed, 251])
        clips = rng.random(c.train_pool) < c.train_clips
        small = (c.train_size[0], max(c.train_size[0], c.train_size[1] // 2))
        sizes = [self._sides(rng, 1, *(small if clip else c.train_size))[0] for clip in clips]
        out = {
            "train": self._forgeries(c.train_sources, sizes, [c.train_frames if v else 1 for v in clips], seed),
            "val": self._forgeries(
                c.val_sources, self._sides(rng, c.val_size, *c.train_size), [1] * c.val_size, 10**4 + seed
            ),
        }
        for b, (lo, hi) in zip(self.bins(), c.test_sizes):
            n = c.test_per_size
            out[b] = self._forgeries(c.test_sources, self._sides(rng, n, lo, hi), [1] * n, 2 * 10**4 + 97 * lo + seed)
        if c.video_clips:
            n = c.video_clips
            out["video"] = self._forgeries(
                c.test_sources, self._sides(rng, n, 96, 160), [c.video_frames] * n, 3 * 10**4 + seed
            )
        return out

    # ---- one model --------------------------------------------------------------------------------------------
    def _model(self, relay: int) -> RelayFormer:
        c = self.config
        return RelayFormer(
            relay,
            c.dim,
            c.depth,
            c.heads,
            c.patch,
            c.tile,
            c.overlap,
            c.lora_rank,
            c.lora_alpha,
            c.rope_dim,
            c.queries,
            c.dim,
            c.decoder_layers,
            c.highpass,
        )

    @staticmethod
    def _input(x: torch.Tensor, resize: int) -> torch.Tensor:
        """uint8 frames ``[T, 3, H, W]`` → the network's input (normalised; resized to ``resize``² when set)."""
        x = (x.float() / 255 - MEAN) / STD
        return F.interpolate(x, (resize, resize), mode="bilinear", antialias=True, align_corners=False) if resize else x

    @staticmethod
    def _output(logits: torch.Tensor, size: tuple[int, int], resize: int) -> torch.Tensor:
        return F.interpolate(logits, size, mode="bilinear", align_corners=False) if resize else logits

    def _predict(self, net: RelayFormer, items: list[dict], resize: int, per_frame: bool = False) -> list[torch.Tensor]:
        """Mask probabilities ``[T, 1, H, W]`` per item (``per_frame``: every frame as its own input)."""
        net.eval()
        out = []
        with torch.no_grad():
            for it in items:
                x = self._input(it["x"], resize)
                clips = list(x.split(1)) if per_frame else [x]
                logits = torch.cat(net(clips))
                out.append(self._output(logits, it["x"].shape[-2:], resize).sigmoid())
        net.train()
        return out

    def _fit(self, relay: int, resize: int, d: dict, seed: int, label: str) -> dict[str, Any]:
        c = self.config
        torch.manual_seed(seed)
        g = np.random.default_rng([seed, 7])
        net = self._model(relay)
        opt = torch.optim.AdamW(net.parameters(), lr=c.lr, weight_decay=0.05)
        sched = warmup_cosine(opt, c.steps)
        every = max(1, c.steps // c.evals)
        best, losses, curve = (-1.0, None), [], []
        for step in self.ctx.progress(range(c.steps), f"{label} (seed {seed})"):
            items = [d["train"][i] for i in g.integers(len(d["train"]), size=c.batch)]
            clips = [self._input(it["x"], resize) for it in items]
            logits = [self._output(lg, it["x"].shape[-2:], resize) for lg, it in zip(net(clips), items)]
            loss = relay_loss(logits, [it["mask"].float() for it in items], c.edge_lambda, c.edge_width)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            if (step + 1) % every == 0 or step + 1 == c.steps:
                f1 = _mean(_f1, self._predict(net, d["val"], resize), d["val"])
                curve.append([step + 1, f1])
                if f1 > best[0]:
                    best = (f1, {k: v.detach().clone() for k, v in net.state_dict().items()})
        return {"state": best[1], "val_f1": best[0], "losses": report.thin(losses), "val_curve": curve}

    # ---- one seed -------------------------------------------------------------------------------------------
    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        d = self._data(seed)
        out: dict[str, Any] = {}
        pictures: dict[str, Any] = {}
        for label, relay, resize in self.variants():
            fit = stage(
                self.ctx, f"seed{seed}-{relay}relay-{resize}", partial(self._fit, relay, resize, d, seed, label)
            )
            net = self._model(relay)
            net.load_state_dict(fit["state"])
            row: dict[str, Any] = {"val_f1": fit["val_f1"]}
            for b in self.bins():
                probs = self._predict(net, d[b], resize)
                row[f"f1@{b}"] = _mean(_f1, probs, d[b])
                row[f"auc@{b}"] = _mean(_auc, probs, d[b])
                row[f"gflops@{b}"] = _gflops(net, [self._input(it["x"], resize) for it in d[b][:4]])
                if seed == 0:
                    pictures.setdefault(
                        b, {"image": _small(d[b][0]["x"][0].float() / 255), "true": _small(d[b][0]["mask"][0].float())}
                    )
                    pictures[b][label] = _small(probs[0][0])
            if c.video_clips:
                joint = self._predict(net, d["video"], resize)
                alone = self._predict(net, d["video"], resize, per_frame=True)
                row["video_f1"] = _mean(_f1, joint, d["video"])
                row["frame_f1"] = _mean(_f1, alone, d["video"])
            row["_curve"] = {"losses": fit["losses"], "val": fit["val_curve"]}
            out[label] = row
        if pictures:
            out["_pictures"] = pictures
        return out

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, res) -> None:
        c = self.config
        plt = pyplot()
        labels = list(res)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        lows = [lo for lo, _ in c.test_sizes]
        for lab in labels:
            for ax, m in zip(axes, ("f1", "auc")):
                vals = [res[lab][f"{m}@{b}"] for b in self.bins()]
                report.curve(ax, lows, vals, lab)
        for ax, m in zip(axes, ("pixel-F1", "pixel AUC")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(lows, self.bins())
            ax.set_xlabel("test resolution (both sides drawn from the bin)")
            ax.set_ylabel(m)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "f1-vs-resolution", "Pixel-F1 and AUC against test resolution, mean ± std over seeds")
        pics = grid.raw[()][0].get("_pictures")
        if pics:
            cols = ["image", "true"] + labels
            fig, axes = plt.subplots(len(pics), len(cols), figsize=(1.9 * len(cols), 2.1 * len(pics)), squeeze=False)
            for i, (b, row) in enumerate(pics.items()):
                for j, col in enumerate(cols):
                    arr = np.asarray(row[col], dtype=float) / 255
                    axes[i, j].imshow(arr.transpose(1, 2, 0) if arr.ndim == 3 else arr, cmap="gray", vmin=0, vmax=1)
                    axes[i, j].set_xticks([]), axes[i, j].set_yticks([])
                    axes[i, j].set_title(f"{b}\n{col}" if j < 2 else col, fontsize=7)
            fig.tight_layout()
            self.ctx.save_plot(
                fig,
                "masks",
                "Seed 0: a test forgery per resolution bin (rows), its true mask and each model's predicted mask "
                f"(probability; shown at ≤ {SHOWN} px)",
            )
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for lab in labels:
            curves = [r[lab]["_curve"]["val"] for r in grid.raw[()] if lab in r]
            report.curve(
                ax, [s for s, _ in curves[0]], [list(v) for v in zip(*[[f for _, f in cu] for cu in curves])], lab
            )
        ax.set_xlabel("training step")
        ax.set_ylabel("validation pixel-F1")
        ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "training", "Validation pixel-F1 during training, mean ± std over seeds")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _gflops(net: RelayFormer, clips: list[torch.Tensor]) -> float:
    """Forward GFLOPs per input, counted by torch's ``FlopCounterMode`` (which fails under ``no_grad`` on this
    network's module hooks, so the forward runs with autograd on and its graph is dropped)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        for x in clips:
            net([x])
    return counter.get_total_flops() / len(clips) / 1e9


def _f1(prob: torch.Tensor, mask: torch.Tensor) -> float:
    """Pixel-F1 of ``prob > 0.5`` against ``mask`` (one image or clip)."""
    pred, true = prob > 0.5, mask.bool()
    tp = (pred & true).sum().item()
    denom = pred.sum().item() + true.sum().item()
    return 2 * tp / denom if denom else 1.0


def _auc(prob: torch.Tensor, mask: torch.Tensor) -> float:
    """Pixel AUC of ``prob`` against ``mask`` (scikit-learn's, as the other extras; 0.5 when one class is absent)."""
    from sklearn.metrics import roc_auc_score

    m = mask.flatten().numpy().astype(bool)
    return float(roc_auc_score(m, prob.flatten().numpy())) if 0 < m.sum() < len(m) else 0.5


def _mean(metric, probs: list[torch.Tensor], items: list[dict]) -> float:
    """``metric(prob, mask)`` averaged over the items (per image or clip, the IMDL protocol)."""
    return float(np.mean([metric(p, it["mask"]) for p, it in zip(probs, items)]))


def _small(x: torch.Tensor) -> list:
    """A picture ``[C, H, W]`` or ``[H, W]`` in [0, 1], its long side shrunk to ≤ ``SHOWN`` px, as uint8 lists."""
    img = x if x.dim() == 3 else x[None]
    scale = min(1.0, SHOWN / max(img.shape[-2:]))
    if scale < 1:
        size = (max(1, round(img.shape[-2] * scale)), max(1, round(img.shape[-1] * scale)))
        img = F.interpolate(img[None], size, mode="area")[0]
    arr = (img.clamp(0, 1) * 255).round().to(torch.uint8)
    return (arr if x.dim() == 3 else arr[0]).tolist()
