"""extras.world.lpwm: LPWM, the Latent Particle World Model. Frames become latent particles (DLP: keypoint
proposals, glimpse-encoded particles with position, scale, depth, Beta transparency and features, depth-composited
glimpses); a causal spatio-temporal transformer predicts the next frame's particles, and per-particle latent actions
(an inverse model in training, a latent policy at inference) make it stochastic. Against the same model without
latent actions, on seeded sprite videos whose sprites turn at random (``sprites.py``), and on an action-conditioned
variant: best-of-k PSNR of 10 predicted frames from 4 context frames, sample diversity and particle tracking."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch

from agentkit.extras import report
from agentkit.extras.nets import psnr_each
from agentkit.extras.sweep import stage, sweep
from agentkit.extras.world.lpwm.config import LPWMConfig
from agentkit.extras.world.lpwm.dlp import DLP, drawn, from_tokens, kl_weights, to_tokens
from agentkit.extras.world.lpwm.dynamics import Dynamics
from agentkit.extras.world.lpwm.sprites import sprite_videos
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "lpwm": "LPWM (latent actions)",
    "deterministic": "deterministic dynamics",
    "lpwm_action": "LPWM + given actions",
}
DATA = {"turns": "random turns", "action": "action-conditioned"}
SPLITS = {"train": 0, "val": 1, "test": 2}
METRICS = ["psnr_best", "psnr_mean", "psnr_policy_mean", "diversity", "track_px", "on", "val_loss"]
POSTERIOR = ["psnr", "track_px", "on"]


class LPWMRecipe(Recipe[LPWMConfig]):
    name = "extras.world.lpwm"
    config_cls = LPWMConfig
    description = "LPWM: latent particles + causal transformer + latent actions vs the same model without them"

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every dataset and method)")
        res = grid.nested(())
        k = c.samples
        text = (
            f"One DLP per seed, warmed up {c.dlp_steps} steps on the frames of every dataset, then frozen; each "
            f"method's dynamics trained {c.dyn_steps} steps on its dataset's particles. Every test clip is rolled "
            f"out {c.frames - c.context} frames from its first {c.context}, {k} times (the deterministic model once: "
            f"its {k} rollouts are the same). psnr_best: the best of the {k} rollouts' PSNR (dB, averaged over the "
            "predicted frames), per clip; psnr_mean: their mean; psnr_policy_mean: one rollout with the latent "
            "policy's mean action at every step instead of a sample; diversity: the RMS difference between two rollouts "
            "of one clip, averaged over pairs, frames and clips; track_px: the distance (px) from each visible true "
            "sprite centre to the nearest particle that is on (transparency > 0.5) in the best rollout; on: the drawn "
            "particles that are on, a predicted frame; val_loss: the kept dynamics' validation loss, β_dyn × (the dynamic KL "
            "+ the latent-action KL) in nats a clip (the deterministic model has no latent-action term)."
        )
        ret: dict[str, float] = {}
        for ds in c.datasets:
            rows = {LABELS[m]: res[f"{ds}: {LABELS[m]}"] for m in c.methods if f"{ds}: {LABELS[m]}" in res}
            body = text + "\n\n" + report.table(rows, METRICS, digits=2)
            if LABELS["deterministic"] in rows and len(rows) > 1:
                body += "\n\n" + report.paired(rows, LABELS["deterministic"], METRICS, digits=2)
            post = {"DLP posterior": res[f"{ds}: DLP posterior"]}
            body += (
                "\n\nThe frozen DLP on the test clips' frames (psnr: the reconstruction from the posterior means; "
                "track_px: as above, on the encoded frames; on: particles with transparency > 0.5 a frame):\n\n"
                + report.table(post, POSTERIOR, digits=2)
            )
            self.ctx.add_section(f"{DATA[ds]} videos, {c.seeds} seeds", body)
            ret.update(report.means(rows, ["psnr_best", "diversity", "track_px"], prefix=f"{ds}/"))
        self._plot(grid)
        self._strips()
        return ret

    # ---- one seed -----------------------------------------------------------------------------------------------
    def _clips(self, ds: str, split: str, seed: int) -> dict[str, np.ndarray]:
        c = self.config
        n = {"train": c.train_clips, "val": c.val_clips, "test": c.test_clips}[split]
        return sprite_videos(
            n,
            c.frames,
            c.size,
            tuple(c.sprites),
            c.turn,
            ds,
            c.redraw,
            seed=1000 * seed + 10 * SPLITS[split] + list(DATA).index(ds),
        )

    def _data(self, seed: int) -> dict[str, dict[str, dict[str, np.ndarray]]]:
        return {
            ds: stage(self.ctx, f"seed{seed}-{ds}-videos", lambda d=ds: {s: self._clips(d, s, seed) for s in SPLITS})
            for ds in self.config.datasets
        }

    def _new_dlp(self) -> DLP:
        c = self.config
        return DLP(c.size, c.patch, c.features, c.bg_features, c.particles, c.anchor_s, c.glimpse, c.width).to(c.device)

    def _new_dynamics(self, method: str) -> Dynamics:
        c = self.config
        return Dynamics(
            7 + c.features, c.bg_features, (c.size // c.patch) ** 2, c.frames, c.dim, c.layers, c.heads,
            context_dim=0 if method == "deterministic" else c.context_dim, context_layers=c.context_layers,
            action_dim=2 if method == "lpwm_action" else 0,
        ).to(c.device)  # fmt: skip

    def _frames(self, clips: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(clips).to(self.config.device).float().div(255)

    def _dlp(self, data, seed: int) -> dict[str, Any]:
        """Warm up the DLP on frames of every dataset's training clips; keep the state with the best validation
        reconstruction (posterior means)."""
        c = self.config
        torch.manual_seed(seed)
        m = self._new_dlp()
        opt = torch.optim.Adam(m.parameters(), lr=c.dlp_lr)
        train = np.concatenate([data[ds]["train"]["frames"].reshape(-1, 3, c.size, c.size) for ds in data])
        val = np.concatenate([data[ds]["val"]["frames"][:, :: max(1, c.frames // 4)].reshape(-1, 3, c.size, c.size)
                              for ds in data])  # fmt: skip
        g = torch.Generator().manual_seed(seed)
        best, best_state, curve = -1.0, None, []
        checks = set(np.linspace(c.dlp_steps / c.evals, c.dlp_steps, c.evals).round().astype(int).tolist())
        for step in self.ctx.progress(range(1, c.dlp_steps + 1), f"DLP warm-up (seed {seed})"):
            m.train()
            x = self._frames(train[torch.randint(len(train), (c.dlp_batch,), generator=g).numpy()])
            loss, parts = m.loss(x, c.beta_kl, c.beta_obj)
            opt.zero_grad()
            loss.backward()
            opt.step()
            curve.append(parts["loss"])
            if step in checks:
                score = self._reconpsnr_each(m, val)
                if score > best:
                    best, best_state = score, {k: v.detach().cpu().clone() for k, v in m.state_dict().items()}
        return {"state": best_state, "val_psnr": best, "losses": report.thin(curve)}

    @torch.no_grad()
    def _reconpsnr_each(self, m: DLP, frames: np.ndarray) -> float:
        m.eval()
        scores = []
        for i in range(0, len(frames), 64):
            x = self._frames(frames[i : i + 64])
            rec = m.decode(DLP.sample(m.encode(x), mean=True)).clamp(0, 1)
            scores.append(psnr_each(rec, x))
        return float(torch.cat(scores).mean())

    @torch.no_grad()
    def _encode(self, m: DLP, clips: np.ndarray) -> tuple[torch.Tensor, ...]:
        """Posterior tokens of every frame: particles' μ, log σ² ``[N, T, K, D]``, background's ``[N, T, Db]``."""
        m.eval()
        n, t = clips.shape[:2]
        parts = []
        for i in range(0, n, 8):
            x = self._frames(clips[i : i + 8]).flatten(0, 1)
            parts.append(to_tokens(m.encode(x)))
        return tuple(torch.cat(p).view(n, t, *p[0].shape[1:]) for p in zip(*parts))

    def _dynamics(self, method: str, tokens, actions, seed: int) -> dict[str, Any]:
        """Train one method's dynamics on the training clips' tokens; keep the state with the lowest validation
        loss (teacher-forced KLs)."""
        c = self.config
        torch.manual_seed(seed)
        dyn = self._new_dynamics(method)
        opt = torch.optim.Adam(dyn.parameters(), lr=c.dyn_lr)
        tr, va = tokens["train"], tokens["val"]
        act_tr = actions["train"] if method == "lpwm_action" else None
        act_va = actions["val"] if method == "lpwm_action" else None
        g = torch.Generator().manual_seed(seed)
        best, best_state, curve = float("inf"), None, []
        checks = set(np.linspace(c.dyn_steps / c.evals, c.dyn_steps, c.evals).round().astype(int).tolist())
        for step in self.ctx.progress(range(1, c.dyn_steps + 1), f"{LABELS[method]} dynamics (seed {seed})"):
            dyn.train()
            idx = torch.randint(len(tr[0]), (c.dyn_batch,), generator=g)
            batch = [t[idx] for t in tr]
            w = kl_weights(batch[0], c.particles)
            loss, parts = dyn.loss(*batch, None if act_tr is None else act_tr[idx], c.beta_dyn, w)
            opt.zero_grad()
            loss.backward()
            opt.step()
            curve.append(parts["loss"])
            if step in checks:
                dyn.eval()
                with torch.no_grad():
                    torch.manual_seed(seed + 1)  # the same latent-action noise at every check
                    val = dyn.loss(*va, act_va, c.beta_dyn, kl_weights(va[0], c.particles))[0].item()
                if val < best:
                    best, best_state = val, {k: v.detach().cpu().clone() for k, v in dyn.state_dict().items()}
        return {"state": best_state, "val_loss": best, "losses": report.thin(curve)}

    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        data = self._data(seed)
        fit = stage(self.ctx, f"seed{seed}-dlp", lambda: self._dlp(data, seed))
        m = self._new_dlp()
        m.load_state_dict(fit["state"])
        out: dict[str, Any] = {}
        for ds in c.datasets:
            tokens = {s: self._encode(m, data[ds][s]["frames"]) for s in SPLITS}
            actions = {s: torch.from_numpy(data[ds][s]["actions"]).to(c.device) for s in SPLITS}
            test = data[ds]["test"]
            out[f"{ds}: DLP posterior"] = self._posterior(m, test, tokens["test"])
            for method in c.methods:
                if method == "lpwm_action" and ds != "action":
                    continue
                fit_dyn = stage(
                    self.ctx,
                    f"seed{seed}-{ds}-{method}",
                    lambda mt=method, tk=tokens, ac=actions: self._dynamics(mt, tk, ac, seed),
                )
                dyn = self._new_dynamics(method)
                dyn.load_state_dict(fit_dyn["state"])
                row = self._evaluate(m, dyn, test, tokens["test"], actions["test"], method, seed)
                row["val_loss"] = fit_dyn["val_loss"]
                out[f"{ds}: {LABELS[method]}"] = row
        return out

    # ---- evaluation ---------------------------------------------------------------------------------------------
    @torch.no_grad()
    def _posterior(self, m: DLP, clips: dict[str, np.ndarray], tokens) -> dict[str, float]:
        c = self.config
        frames = clips["frames"].reshape(-1, 3, c.size, c.size)
        z = from_tokens(tokens[0], tokens[2])
        return {
            "psnr": self._reconpsnr_each(m, frames),
            "track_px": _track(z, c.particles, clips, c.size),
            "on": float((_shown(z, c.particles)[1] > 0.5).float().sum(-1).mean()),
        }

    @torch.no_grad()
    def _rollouts(
        self, m: DLP, dyn: Dynamics, tokens, actions, method: str, seed: int, clips: slice = slice(None), sample=True
    ):
        """``samples`` rollouts of the chosen test clips (one with ``sample=False``: the latent policy's mean):
        images ``[k, N, F, 3, S, S]`` of the predicted frames and their particles (tokens ``[k, N, F, K, D]``)."""
        c = self.config
        ctx_n, steps = c.context, c.frames - c.context
        k = c.samples if dyn.context_dim and sample else 1
        torch.manual_seed(seed + 2)
        z0, bg0 = tokens[0][clips, :ctx_n], tokens[2][clips, :ctx_n]
        act = actions[clips] if method == "lpwm_action" else None
        dyn.eval()
        m.eval()
        images, particles = [], []
        for _ in range(k):
            z, bg = dyn.rollout(z0, bg0, steps, sample=sample, actions=act)
            zf, bgf = z[:, ctx_n:], bg[:, ctx_n:]
            imgs = []
            for i in range(0, len(zf), 8):
                imgs.append(
                    m.decode(from_tokens(zf[i : i + 8].flatten(0, 1), bgf[i : i + 8].flatten(0, 1))).clamp(0, 1)
                )
            images.append(torch.cat(imgs).view(len(zf), steps, 3, c.size, c.size))
            particles.append(zf)
        return torch.stack(images), torch.stack(particles)

    @torch.no_grad()
    def _evaluate(self, m, dyn, clips, tokens, actions, method: str, seed: int) -> dict[str, Any]:
        c = self.config
        images, particles = self._rollouts(m, dyn, tokens, actions, method, seed)
        truth = self._frames(clips["frames"][:, c.context :])
        per_frame = torch.stack(
            [psnr_each(img.flatten(0, 1), truth.flatten(0, 1)).view(truth.shape[:2]) for img in images]
        )
        per_clip = per_frame.mean(-1)  # [k, N]
        best = per_clip.argmax(0)
        n = truth.shape[0]
        if len(images) > 1:
            pairs = list(itertools.combinations(range(len(images)), 2))
            div = float(
                np.mean([(images[i] - images[j]).pow(2).flatten(2).mean(-1).sqrt().mean().item() for i, j in pairs])
            )
        else:
            div = 0.0
        best_particles = particles[best, torch.arange(n)]  # [N, F, K, D]
        z = from_tokens(best_particles, torch.zeros(*best_particles.shape[:2], 1))
        future = {key: clips[key][:, c.context :] for key in ("centres", "visible")}
        on = float((_shown(z, c.particles)[1] > 0.5).float().sum(-1).mean())
        if dyn.context_dim:  # the latent policy's mean action instead of a sample
            img = self._rollouts(m, dyn, tokens, actions, method, seed, sample=False)[0][0]
            policy_mean = float(psnr_each(img.flatten(0, 1), truth.flatten(0, 1)).mean())
        else:
            policy_mean = float(per_clip.mean())
        return {
            "psnr_policy_mean": policy_mean,
            "psnr_best": float(per_clip.max(0).values.mean()),
            "psnr_mean": float(per_clip.mean()),
            "diversity": div,
            "track_px": _track(z, c.particles, future, c.size),
            "on": on,
            "horizon": per_frame[best, torch.arange(n)].mean(0).tolist(),
        }

    # ---- report -------------------------------------------------------------------------------------------------
    def _plot(self, grid) -> None:
        c = self.config
        plt = pyplot()
        fig, axes = plt.subplots(1, len(c.datasets), figsize=(5.5 * len(c.datasets), 3.6), squeeze=False)
        runs = grid.raw[()]
        for ax, ds in zip(axes[0], c.datasets):
            for method in c.methods:
                lab = f"{ds}: {LABELS[method]}"
                curves = [r[lab]["horizon"] for r in runs if lab in r]
                if curves:
                    report.curve(
                        ax, list(range(1, len(curves[0]) + 1)), [list(v) for v in zip(*curves)], LABELS[method]
                    )
            ax.set_title(f"{DATA[ds]} videos", fontsize=9)
            ax.set_xlabel(f"frame after the {c.context} context frames")
            ax.set_ylabel(f"PSNR of the best of {c.samples} (dB)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig, "psnr-vs-horizon", f"Best-of-{c.samples} PSNR at each predicted frame, mean ± std over seeds"
        )

    def _strips(self) -> None:
        """Rollout strips of seed 0's first test clips: the truth, then each method's best rollout and (with latent
        actions) its worst, with the particles that are on drawn as dots."""
        c = self.config
        stages = self.ctx.run_dir / "state" / "stages"
        if not c.shown or not (stages / "seed0-dlp.pt").exists():
            return
        data = self._data(0)
        m = self._new_dlp()
        m.load_state_dict(torch.load(stages / "seed0-dlp.pt", weights_only=False)["state"])
        plt = pyplot()
        for ds in c.datasets:
            clips = data[ds]["test"]
            shown = {key: v[: c.shown] for key, v in clips.items()}
            tokens = self._encode(m, shown["frames"])
            actions = torch.from_numpy(shown["actions"]).to(c.device)
            truth = shown["frames"].astype(np.float32) / 255
            post = from_tokens(tokens[0], tokens[2])
            rows = [("truth; posterior particles", truth, _dots(post, c.particles, c.size))]
            for method in c.methods:
                path = stages / f"seed0-{ds}-{method}.pt"
                if not path.exists():
                    continue
                dyn = self._new_dynamics(method)
                dyn.load_state_dict(torch.load(path, weights_only=False)["state"])
                images, particles = self._rollouts(m, dyn, tokens, actions, method, 0)
                target = self._frames(shown["frames"][:, c.context :])
                score = torch.stack(
                    [psnr_each(i.flatten(0, 1), target.flatten(0, 1)).view(c.shown, -1).mean(-1) for i in images]
                )
                picks = [("best", score.argmax(0))] + ([("worst", score.argmin(0))] if len(images) > 1 else [])
                for what, idx in picks:
                    img = images[idx, torch.arange(c.shown)].cpu().numpy()
                    z = from_tokens(particles[idx, torch.arange(c.shown)], torch.zeros(c.shown, img.shape[1], 1))
                    dots = [[np.zeros((0, 2))] * c.context + d for d in _dots(z, c.particles, c.size)]
                    rows.append((f"{LABELS[method]}: {what}", np.concatenate([truth[:, : c.context], img], 1), dots))
            fig, axes = plt.subplots(len(rows) * c.shown, c.frames, figsize=(1.0 * c.frames, 1.05 * len(rows) * c.shown),
                                     squeeze=False)  # fmt: skip
            for clip in range(c.shown):
                for r, (label, imgs, dots) in enumerate(rows):
                    for t in range(c.frames):
                        ax = axes[clip * len(rows) + r, t]
                        ax.imshow(np.clip(imgs[clip, t].transpose(1, 2, 0), 0, 1))
                        if len(dots[clip][t]):
                            ax.scatter(dots[clip][t][:, 0], dots[clip][t][:, 1], s=3, c="w", linewidths=0)
                        ax.set_xlim(-0.5, c.size - 0.5)  # particles off the canvas do not widen the panel
                        ax.set_ylim(c.size - 0.5, -0.5)
                        ax.set_xticks([])
                        ax.set_yticks([])
                        if t == 0:
                            ax.set_ylabel(label, fontsize=5, rotation=0, ha="right", va="center")
                        if clip == 0 and r == 0:
                            ax.set_title("context" if t < c.context else f"+{t - c.context + 1}", fontsize=6)
            fig.tight_layout(pad=0.2)
            self.ctx.save_plot(
                fig, f"rollouts-{ds}",
                f"Seed 0, {DATA[ds]} test clips: {c.context} context frames, then each method's best and worst of "
                f"{c.samples} rollouts; dots: particles that are on",
            )  # fmt: skip

    def evaluate(self) -> dict[str, Any]:
        return {}


def _to_px(pos: torch.Tensor, size: int) -> torch.Tensor:
    """Positions in [−1, 1] (pixel-centre convention of ``grid_sample``) to pixel indices."""
    return (pos + 1) * size / 2 - 0.5


def _shown(z: dict[str, torch.Tensor], k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``[..., k, 2]`` and transparencies ``[..., k]`` of the ``k`` particles the renderer draws (lowest
    score)."""
    keep = drawn(z["score"], k)
    return z["pos"].gather(-2, keep[..., None].expand(*keep.shape, 2)), z["obj_on"].gather(-1, keep)


def _track(z: dict[str, torch.Tensor], k: int, clips: dict[str, np.ndarray], size: int) -> float:
    """Mean distance (px) from each visible true centre ``[N, T, S, 2]`` to the nearest drawn particle that is on
    (any drawn particle when none is); ``z`` holds ``[N, T, P, ·]`` particles."""
    pos, obj_on = _shown(z, k)
    px = _to_px(pos.float().cpu(), size)
    on = obj_on.float().cpu() > 0.5
    true = torch.from_numpy(np.nan_to_num(clips["centres"]))
    vis = torch.from_numpy(clips["visible"])
    d = (true[:, :, :, None] - px[:, :, None]).norm(dim=-1)  # [N, T, S, k]
    none_on = ~on.any(-1, keepdim=True)
    d = d.masked_fill(~(on | none_on)[:, :, None], float("inf"))
    return float(d.min(-1).values[vis].mean())


def _dots(z: dict[str, torch.Tensor], k: int, size: int) -> list:
    """Per clip, per frame: pixel positions ``[n, 2]`` of the drawn particles that are on."""
    pos, obj_on = _shown(z, k)
    px, on = _to_px(pos.float().cpu(), size), obj_on.float().cpu() > 0.5
    return [[px[i, t][on[i, t]].numpy() for t in range(px.shape[1])] for i in range(px.shape[0])]
