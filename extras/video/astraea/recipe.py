"""extras.video.astraea: token budgets for video diffusion transformers (Astraea). A small video DiT is trained here
by flow matching on moving Fashion-MNIST; at sampling time each Euler step recomputes only a budget of tokens,
picked by Astraea's score, and a genetic search sets the budget of every step under a mean-compute target. Compared
at the same mean compute with a uniform budget, random tokens and timestep skipping, by PSNR and SSIM against the
full model's samples from the same noise, measured speed-up and FLOPs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.nets import flow_pair, psnr, timed, warmup_cosine
from agentkit.extras.sweep import stage, sweep
from agentkit.extras.video.astraea.config import AstraeaConfig
from agentkit.extras.video.astraea.model import Schedule, VideoDiT, genetic_budgets, sample
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "astraea": "Astraea (score + searched budgets)",
    "uniform": "uniform budget (score)",
    "random": "random tokens (uniform budget)",
    "skip": "timestep skipping",
}
SHOWN = 2  # test clips in the frame grid


class AstraeaRecipe(Recipe[AstraeaConfig]):
    name = "extras.video.astraea"
    config_cls = AstraeaConfig
    description = "Astraea: scored token selection + searched per-step budgets vs uniform / random / step skipping"

    def setup(self) -> None:
        data.require("skimage", "vision", "extras.video.astraea's SSIM needs scikit-image")

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every method and budget)")
        res = {lab: per for lab, per in grid.nested(()).items() if lab in LABELS.values()}
        pct = [_pct(b) for b in c.budgets]
        quality = [f"{m}@{p}" for p in pct for m in ("psnr", "ssim")]
        cost = [f"{m}@{p}" for p in pct for m in ("speedup", "gflops", "share")]
        full_cols = ["gflops", "seconds", "val_loss", "velocity_change"]
        full = grid.nested((), full_cols).get("full model", {})
        self.ctx.add_section(
            f"{c.seeds} seeds",
            f"{c.test_clips} test noises per seed, each sampled with {c.euler_steps} Euler steps by the full model "
            "and by each method at each mean budget (the share of tokens recomputed per step, step 0 included). "
            "psnr@b, ssim@b: the method's clips against the full model's from the same noise (dB; SSIM per frame, "
            "scikit-image, averaged); speedup@b: the full sampler's wall time over the method's on the same batch, "
            f"this machine ({c.device}), median of {c.timing_repeats} back-to-back pairs; gflops@b: the network's matmul FLOPs per "
            "clip (counted from the tokens each step recomputed); share@b: the tokens actually recomputed over all "
            "N · steps (rounding moves it off b a little). Budgets searched on "
            f"{c.ga_clips} calibration noises ({c.ga_parents} parents, {c.ga_children} children, "
            f"{c.ga_generations} generations; the paper: 50, 30, 30).\n\n"
            + report.table(res, quality, digits=2)
            + "\n\n"
            + report.paired(res, LABELS["uniform"], quality, digits=2)
            + "\n\n"
            + report.paired(res, LABELS["skip"], quality, digits=2)
            + "\n\n"
            + report.table(res, cost, digits=2)
            + "\n\nThe full model (seconds: one sampling of the test batch; val_loss: the kept DiT's validation flow "
            "loss; velocity_change: ‖v_s − v_{s−1}‖ / ‖v_{s−1}‖ between consecutive Euler steps, mean over steps and "
            "clips: how much a step adds that reusing the last velocity misses):\n\n"
            + report.table({"full model": full}, full_cols),
        )
        self._plot(grid, res)
        return report.means(res, quality + [f"speedup@{p}" for p in pct])

    # ---- one seed -------------------------------------------------------------------------------------------
    def _dit(self) -> VideoDiT:
        c = self.config
        return VideoDiT(c.frames, c.size, c.patch, c.dim, c.depth, c.heads).to(c.device)

    def _clips(self, n: int, split: str, seed: int) -> torch.Tensor:
        c = self.config
        v = data.moving_fashion_mnist(n, c.frames, c.size, tuple(c.items), split, seed)
        return torch.from_numpy(v) * 2 - 1  # [-1, 1]

    def _train_dit(self, seed: int) -> dict[str, Any]:
        c = self.config
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        x, xv = self._clips(c.train_clips, "train", seed), self._clips(c.val_clips, "test", seed)
        net = self._dit()
        opt = torch.optim.AdamW(net.parameters(), lr=c.lr, weight_decay=0.0)
        sched = warmup_cosine(opt, c.train_steps)
        gv = torch.Generator().manual_seed(10_000 + seed)
        val_eps, val_t = torch.randn(xv.shape, generator=gv), torch.rand(len(xv), generator=gv)
        every = max(1, c.train_steps // c.evals)
        losses, best = [], (float("inf"), None)
        for step in self.ctx.progress(range(c.train_steps), f"video DiT (seed {seed})"):
            x0 = x[torch.randint(len(x), (c.batch,), generator=g)]
            t = torch.rand(len(x0), generator=g)
            xt, v = flow_pair(x0, torch.randn(x0.shape, generator=g), t)
            loss = (net(xt.to(c.device), t.to(c.device)) - v.to(c.device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if (step + 1) % every == 0 or step + 1 == c.train_steps:
                net.eval()
                with torch.no_grad():
                    sq = 0.0
                    for i in range(0, len(xv), 32):
                        xt, v = flow_pair(xv[i : i + 32], val_eps[i : i + 32], val_t[i : i + 32])
                        sq += float(
                            (net(xt.to(c.device), val_t[i : i + 32].to(c.device)) - v.to(c.device)).pow(2).sum()
                        )
                    vl = sq / xv.numel()
                net.train()
                if vl < best[0]:
                    best = (vl, {k: t.detach().cpu().clone() for k, t in net.state_dict().items()})
        return {"state": best[1], "val_loss": best[0], "losses": report.thin(losses)}

    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        dit = stage(self.ctx, f"seed{seed}-dit", lambda: self._train_dit(seed))
        net = self._dit()
        net.load_state_dict(dit["state"])
        net.eval()
        shape = (c.frames, c.size, c.size)
        test_noise = torch.randn(c.test_clips, *shape, generator=torch.Generator().manual_seed(20_000 + seed))
        cal_noise = torch.randn(c.ga_clips, *shape, generator=torch.Generator().manual_seed(30_000 + seed))
        test_noise, cal_noise = test_noise.to(c.device), cal_noise.to(c.device)
        steps, n = c.euler_steps, net.tokens
        vels: list[torch.Tensor] = []
        ref, _ = sample(net, test_noise, Schedule.full(steps), velocities=vels)
        cal_ref, _ = sample(net, cal_noise, Schedule.full(steps))
        full_seconds = min(self._seconds(net, test_noise, Schedule.full(steps), seed) for _ in range(c.timing_repeats))
        full_flops = sum(net.flops(k) for k in Schedule.full(steps).counts(n))
        out: dict[str, Any] = {
            "full model": {
                "gflops": full_flops / 1e9,
                "seconds": full_seconds,
                "val_loss": dit["val_loss"],
                "velocity_change": _velocity_change(vels),
            }
        }
        shown: dict[str, Any] = {"full model": _frames(ref[:SHOWN])}
        searches: dict[str, Any] = {}
        for b in c.budgets:
            p = _pct(b)
            search = stage(
                self.ctx, f"seed{seed}-search-{p}", lambda b=b: self._search(net, cal_noise, cal_ref, b, seed)
            )
            searches[p] = search
            for m in c.methods:
                sch = {
                    "astraea": Schedule(search["budgets"]),
                    "uniform": Schedule.uniform(steps, b),
                    "random": Schedule(Schedule.uniform(steps, b).budgets, select="random"),
                    "skip": Schedule.skipping(steps, b),
                }[m]
                x, counts = sample(net, test_noise, sch, torch.Generator().manual_seed(40_000 + seed))
                row = out.setdefault(LABELS[m], {})
                row[f"psnr@{p}"] = _psnr(x, ref)
                row[f"ssim@{p}"] = _ssim(x, ref)
                row[f"gflops@{p}"] = sum(net.flops(k) for k in counts) / 1e9
                row[f"speedup@{p}"] = self._speedup(net, test_noise, sch, seed)
                row[f"share@{p}"] = float(np.mean(counts) / n)
                if b == c.budgets[len(c.budgets) // 2]:
                    shown[LABELS[m]] = _frames(x[:SHOWN])
        out["_plots"] = {"frames": shown, "searches": searches, "losses": dit["losses"]}
        return out

    def _search(self, net: VideoDiT, noise: torch.Tensor, ref: torch.Tensor, mean: float, seed: int) -> dict:
        """The genetic search for per-step budgets at mean ``mean``, its fitness the MSE of samples from the
        calibration ``noise`` to the full model's ``ref``."""
        c = self.config

        def fitness(budgets: list[float]) -> float:
            x, _ = sample(net, noise, Schedule(budgets))
            return float((x - ref).pow(2).mean())

        budgets, history = genetic_budgets(
            fitness,
            c.euler_steps,
            mean,
            c.ga_parents,
            c.ga_children,
            c.ga_generations,
            c.min_budget,
            seed=seed,
            progress=lambda it: self.ctx.progress(it, f"budget search {_pct(mean)} (seed {seed})"),
        )
        return {"budgets": budgets, "history": history}

    def _seconds(self, net: VideoDiT, noise: torch.Tensor, sch: Schedule, seed: int) -> float:
        """Wall time of one sampling of ``noise`` under ``sch``."""
        return timed(lambda: sample(net, noise, sch, torch.Generator().manual_seed(40_000 + seed)), noise.is_cuda)[1]

    def _speedup(self, net: VideoDiT, noise: torch.Tensor, sch: Schedule, seed: int) -> float:
        """The median over ``timing_repeats`` of the full sampler's time over ``sch``'s, timed back to back (a
        load that comes and goes then slows both alike)."""
        full = Schedule.full(len(sch.budgets))
        ratios = [
            self._seconds(net, noise, full, seed) / self._seconds(net, noise, sch, seed)
            for _ in range(self.config.timing_repeats)
        ]
        return float(np.median(ratios))

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, res) -> None:
        c = self.config
        plt = pyplot()
        pct = [_pct(b) for b in c.budgets]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for lab, per in res.items():
            for ax, metric in zip(axes, ("psnr", "ssim")):
                xs = [float(np.mean(per[f"speedup@{p}"])) for p in pct]
                report.curve(ax, xs, [per[f"{metric}@{p}"] for p in pct], lab)
        for ax, metric in zip(axes, ("PSNR to the full model (dB)", "SSIM to the full model")):
            ax.set_xlabel(f"measured speed-up over the full sampler ({c.device})")
            ax.set_ylabel(metric)
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig, "quality-vs-speed", f"Quality against measured speed-up at mean budgets {', '.join(pct)}, mean ± std"
        )
        first = grid.raw[()][0].get("_plots", {})
        frames = first.get("frames", {})
        if frames:
            rows = len(frames) * SHOWN
            fig, axes = plt.subplots(rows, c.frames, figsize=(1.1 * c.frames, 1.2 * rows), squeeze=False)
            for i, (lab, clips) in enumerate(frames.items()):
                for j, clip in enumerate(clips):
                    for f, img in enumerate(clip):
                        ax = axes[i * SHOWN + j, f]
                        ax.imshow(np.asarray(img), cmap="gray", vmin=0, vmax=1)
                        ax.set_xticks([]), ax.set_yticks([])
                    axes[i * SHOWN + j, 0].set_ylabel(lab if j == 0 else "", fontsize=6, rotation=0, ha="right")
            fig.tight_layout()
            mid = pct[len(pct) // 2]
            self.ctx.save_plot(
                fig, "frames", f"Seed 0: two test clips from the same noise, full model and each method at {mid}"
            )
        searches = first.get("searches", {})
        if searches:
            fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
            for p, s in searches.items():
                axes[0].plot(range(len(s["budgets"])), s["budgets"], marker="o", label=f"mean {p}")
                axes[1].plot(range(len(s["history"])), s["history"], marker=".", label=f"mean {p}")
            axes[0].set_xlabel("Euler step (t = 1 → 0)")
            axes[0].set_ylabel("searched budget")
            axes[1].set_xlabel("generation (0: the uniform budget; 1: the initial population)")
            axes[1].set_ylabel("calibration MSE of the best")
            axes[1].set_yscale("log")
            axes[0].legend(fontsize=7)
            fig.tight_layout()
            self.ctx.save_plot(fig, "budgets", "Seed 0: the searched per-step budgets and the search's progress")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _pct(b: float) -> str:
    return f"{round(100 * b)}%"


def _frames(x: torch.Tensor) -> list:
    """Clips ``[k, F, S, S]`` in [−1, 1] as nested lists in [0, 1] (3 decimals), for the frame grid."""
    return np.round(((x.clamp(-1, 1) + 1) / 2).cpu().numpy(), 3).tolist()


def _velocity_change(vels: list[torch.Tensor]) -> float:
    """Mean over steps and clips of ‖v_s − v_{s−1}‖ / ‖v_{s−1}‖, from a sampler's per-step velocities."""
    out = [
        ((v - prev).flatten(1).norm(dim=1) / prev.flatten(1).norm(dim=1).clamp(min=1e-12)).mean()
        for prev, v in zip(vels[:-1], vels[1:])
    ]
    return float(torch.stack(out).mean())


def _psnr(x: torch.Tensor, ref: torch.Tensor) -> float:
    """``nets.psnr`` of clips in [−1, 1], mapped to [0, 1]."""
    return psnr((x.clamp(-1, 1) + 1) / 2, (ref.clamp(-1, 1) + 1) / 2)


def _ssim(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Mean SSIM (scikit-image, 7 × 7 windows, range [0, 1]) over every frame of every clip."""
    from skimage.metrics import structural_similarity

    a = ((x.clamp(-1, 1) + 1) / 2).cpu().numpy()
    b = ((ref.clamp(-1, 1) + 1) / 2).cpu().numpy()
    return float(
        np.mean([structural_similarity(fa, fb, data_range=1.0) for ca, cb in zip(a, b) for fa, fb in zip(ca, cb)])
    )
