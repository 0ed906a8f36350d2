"""extras.scene.megs2: MEGS², memory-efficient 3D Gaussian Splatting. Spherical-Gaussian colour lobes replace SH-3's
48 floats, and one ADMM-constrained problem prunes primitives and lobes together to a memory budget; against SH-3
with sequential pruning (opacity, then SH degree: LightGaussian-style) and lobes with sequential pruning at equal
static memory, on procedural objects with Blinn-Phong (view-dependent) colour rendered here (``scenes.py``) and
fitted with a pure-PyTorch rasteriser (``render.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from agentkit.extras import report
from agentkit.extras.nets import psnr
from agentkit.extras.scene.megs2.config import MEGS2Config
from agentkit.extras.scene.megs2.model import GEOMETRY_FLOATS, GaussianModel
from agentkit.extras.scene.megs2.prune import BudgetADMM
from agentkit.extras.scene.megs2.render import covariances, project
from agentkit.extras.scene.megs2.s2fit import fit_s2
from agentkit.extras.scene.megs2.scenes import scene
from agentkit.extras.sweep import stage, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "megs2": "MEGS² (lobes, unified ADMM pruning)",
    "lobes_seq": "lobes, sequential pruning",
    "sh3_seq": "SH-3, sequential pruning (LightGaussian-style)",
}
DENSE = {"sh": "SH-3 dense", "sg": "lobes dense"}


class MEGS2Recipe(Recipe[MEGS2Config]):
    name = "extras.scene.megs2"
    config_cls = MEGS2Config
    description = "MEGS²: SG colour lobes + unified ADMM pruning vs SH-3 / lobes with sequential pruning, equal memory"

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every method and budget)")
        res = grid.nested(())
        pct = [_pct(b) for b in c.budgets]
        rows = {lab: res[lab] for lab in [*LABELS.values()] if lab in res}
        quality = [f"psnr@{p}" for p in pct]
        memory = [
            f"{m}@{p}" for p in pct for m in ("static_kb", "render_kb", "raster_kb", "primitives", "colour_floats")
        ]
        dense = {lab: res[lab] for lab in DENSE.values() if lab in res}
        s2 = {lab.removeprefix("S²: "): per for lab, per in res.items() if lab.startswith("S²: ")}
        self.ctx.add_section(
            "Colour alone, on S²",
            f"Before any splatting: {c.s2_functions} seeded Blinn-Phong radiance functions a seed (shininess 8, 24 or "
            f"64), each fitted on {c.s2_directions // 2} Fibonacci directions and tested on the {c.s2_directions // 2} "
            "between them; SH by least squares (its optimum), lobes by Adam. psnr: test PSNR (dB) averaged over the "
            "functions; floats: the colour's floats a primitive.\n\n" + report.table(s2, ["floats", "psnr"], digits=2),
        )
        self.ctx.add_section(
            f"{c.seeds} seeds",
            f"One procedural object per seed, {c.views} views at {c.size}² (every {c.test_every}th held out for the "
            f"test), {c.gaussians} Gaussians initialised at training surface hits; each dense model trained "
            f"{c.dense_steps} steps, then every method pruned to each static budget (a share of the dense SH-3 "
            f"model's floats) with {c.prune_steps} more steps. psnr@b: test PSNR (dB); static_kb@b: the floats the "
            "model keeps × 4 bytes; render_kb@b: the bytes a test view's per-primitive stage allocates (EWA projection "
            "and colour evaluation: what grows with the primitives and their colour model); raster_kb@b: the whole "
            "render's, with the tiles' per-pixel blending (on CPU the outputs of every op, views excluded; on CUDA "
            "the peaks); primitives@b and colour_floats@b: what is left.\n\n"
            + report.table(rows, quality, digits=2)
            + "\n\n"
            + report.paired(rows, LABELS["sh3_seq"], quality, digits=2)
            + "\n\n"
            + report.paired(rows, LABELS["lobes_seq"], quality, digits=2)
            + "\n\n"
            + report.table(rows, memory, digits=1)
            + "\n\nThe dense models (before pruning):\n\n"
            + report.table(
                dense, ["psnr", "static_kb", "render_kb", "raster_kb", "primitives", "colour_floats"], digits=2
            ),
        )
        self._plot(grid, rows, dense)
        return report.means(rows, quality)

    # ---- one seed ----------------------------------------------------------------------------------------------
    def _scene(self, seed: int) -> dict:
        c = self.config
        return scene(seed, c.views, c.size, c.test_every, c.category)

    def _model(self, sc: dict, kind: str, seed: int) -> GaussianModel:
        c = self.config
        g = torch.Generator().manual_seed(seed)
        idx = torch.randperm(len(sc["surface"]), generator=g)[: c.gaussians]
        return GaussianModel(sc["surface"][idx], sc["colours"][idx], kind=kind, lobes=c.lobes, generator=g).to(c.device)

    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        sc = stage(self.ctx, f"seed{seed}-scene", lambda: self._scene(seed))
        out: dict[str, Any] = {
            f"S²: {name}": r for name, r in fit_s2(seed, c.s2_functions, c.s2_directions, c.s2_steps).items()
        }
        denses = {}
        for kind in ("sh", "sg"):
            fit = stage(self.ctx, f"seed{seed}-dense-{kind}", lambda k=kind: self._dense(sc, k, seed))
            m = self._model(sc, kind, seed)
            m.load_state_dict(fit["state"])
            denses[kind] = fit["state"]
            out[DENSE[kind]] = self._evaluate(m, sc)
        full = GaussianModel(torch.zeros(c.gaussians, 3), torch.zeros(c.gaussians, 3), kind="sh").static_floats()
        shown: dict[str, Any] = {"target": _image(sc["images"][_test_views(sc)[0]])}
        for b in c.budgets:
            p, budget = _pct(b), int(b * full)
            for method in c.methods:
                kind = "sh" if method == "sh3_seq" else "sg"
                m = self._model(sc, kind, seed)
                m.load_state_dict(denses[kind])
                self._prune(method, m, sc, budget, seed)
                if m.static_floats() > budget:
                    raise RuntimeError(f"{method} left {m.static_floats()} floats over its budget {budget}")
                row = self._evaluate(m, sc)
                for key, v in row.items():
                    out.setdefault(LABELS[method], {})[f"{key}@{p}"] = v
                if b == c.budgets[0]:
                    with torch.no_grad():
                        shown[LABELS[method]] = _image(m(sc["cameras"][_test_views(sc)[0]], self._bg())[0])
        out["_plots"] = {"renders": shown}
        return out

    def _bg(self) -> torch.Tensor:
        return torch.zeros(3, device=self.config.device)

    def _optimiser(self, m: GaussianModel) -> torch.optim.Optimizer:
        lr = self.config.lr
        groups = [
            {"params": [m.means], "lr": lr * 0.016},
            {"params": [m.log_scale], "lr": lr * 0.5},
            {"params": [m.quat], "lr": lr * 0.1},
            {"params": [m.opacity_logit], "lr": lr * 5},
        ]
        if m.kind == "sh":
            groups.append({"params": [m.sh], "lr": lr * 0.25})
        else:
            groups.append({"params": [m.base, m.amp, m.axis, m.sharp_raw], "lr": lr * 0.25})
        return torch.optim.Adam(groups, eps=1e-15)

    def _steps(self, m: GaussianModel, sc: dict, steps: int, g: torch.Generator, desc: str, admm=None) -> list[float]:
        """``steps`` Adam steps of L1 on one random training view each (ADMM's penalty added when given)."""
        c = self.config
        train = [i for i in range(len(sc["cameras"])) if not bool(sc["test"][i])]
        opt = self._optimiser(m)
        losses = []
        for step in self.ctx.progress(range(steps), desc):
            if admm is not None and step % c.admm_every == 0:
                admm.update(m.opacity.detach(), m.amp.detach())
            i = train[int(torch.randint(len(train), (1,), generator=g))]
            img, _ = m(sc["cameras"][i], self._bg())
            loss = (img - sc["images"][i].to(img)).abs().mean()
            if admm is not None:
                loss = loss + admm.penalty(m.opacity, m.amp)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    def _dense(self, sc: dict, kind: str, seed: int) -> dict[str, Any]:
        m = self._model(sc, kind, seed)
        g = torch.Generator().manual_seed(seed)
        losses = self._steps(m, sc, self.config.dense_steps, g, f"{DENSE[kind]} (seed {seed})")
        return {
            "state": {k: v.detach().cpu().clone() for k, v in m.state_dict().items()},
            "losses": report.thin(losses),
        }

    def _prune(self, method: str, m: GaussianModel, sc: dict, budget: int, seed: int) -> None:
        """Bring ``m`` within ``budget`` floats by ``method`` and fine-tune; every method takes ``prune_steps``."""
        c = self.config
        g = torch.Generator().manual_seed(seed + 1)
        desc = f"{LABELS[method]} to {budget} floats (seed {seed})"
        if method == "megs2":
            admm = BudgetADMM(budget, c.rho, c_prim=GEOMETRY_FLOATS + 3, c_lobe=7)
            n_admm = int(c.admm_share * c.prune_steps)
            self._steps(m, sc, n_admm, g, desc, admm=admm)
            admm.update(m.opacity.detach(), m.amp.detach())
            m.drop_lobes(~admm.keep_lobe)
            m.keep(admm.keep_prim)
            self._steps(m, sc, c.prune_steps - n_admm, g, desc)
            return
        m.keep_most_opaque(int(c.seq_keep * len(m.means)))
        per_prim = GEOMETRY_FLOATS + 3
        if method == "sh3_seq":
            while m.static_floats() > budget and m.degree > 0:
                m.cut_degree(m.degree - 1)
        else:
            spare = (budget - len(m.means) * per_prim) // 7
            norms = (m.amp.detach().norm(dim=-1) * m.alive).flatten()
            dead = torch.ones_like(norms, dtype=torch.bool)
            if spare > 0:
                dead[torch.argsort(norms, descending=True)[:spare]] = False
            m.drop_lobes(dead.view_as(m.alive))
        if m.static_floats() > budget:  # still over with no colour left to cut: fewer primitives, by opacity
            m.keep_most_opaque(budget // per_prim)
        self._steps(m, sc, c.prune_steps, g, desc)

    @torch.no_grad()
    def _evaluate(self, m: GaussianModel, sc: dict) -> dict[str, float]:
        views = _test_views(sc)
        scores = []
        for i in views:
            img, _ = m(sc["cameras"][i], self._bg())
            scores.append(psnr(img.clamp(0, 1)[None].cpu(), sc["images"][i][None]))
        colour = m.static_floats() - len(m.means) * GEOMETRY_FLOATS
        stage_bytes, total_bytes = self._render_bytes(m, sc["cameras"][views[0]])
        return {
            "psnr": float(np.mean(scores)),
            "static_kb": m.static_floats() * 4 / 1024,
            "render_kb": stage_bytes / 1024,
            "raster_kb": total_bytes / 1024,
            "primitives": float(len(m.means)),
            "colour_floats": float(colour),
        }

    def _render_bytes(self, m: GaussianModel, cam) -> tuple[float, float]:
        """Bytes one render allocates, (per-primitive stage: EWA projection and colour evaluation, what grows with
        the primitives and their colour model; the whole render, with the tiles' per-pixel blending): on CPU the
        outputs of every op (views of an input excluded); on CUDA the peaks."""

        def stage_only():
            project(m.means, covariances(m.log_scale, m.quat), cam)
            m.colours(cam)

        out = []
        for fn in (stage_only, lambda: m(cam, self._bg())):
            if self.config.device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                with torch.no_grad():
                    fn()
                out.append(float(torch.cuda.max_memory_allocated() - base))
            else:
                with torch.no_grad(), _AllocatedBytes() as counter:
                    fn()
                out.append(float(counter.total))
        return out[0], out[1]

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, rows, dense) -> None:
        c = self.config
        plt = pyplot()
        pct = [_pct(b) for b in c.budgets]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, mem, what in (
            (axes[0], "static_kb", "static memory (KiB)"),
            (axes[1], "render_kb", "per-view primitive buffers (KiB)"),
        ):
            for lab, per in rows.items():
                xs = [float(np.mean(per[f"{mem}@{p}"])) for p in pct]
                report.curve(ax, xs, [per[f"psnr@{p}"] for p in pct], lab)
            for lab, per in dense.items():
                ax.errorbar(
                    [float(np.mean(per[mem]))], [float(np.mean(per["psnr"]))], marker="*", ms=10, ls="", label=lab
                )
            ax.set_xlabel(what)
            ax.set_ylabel("test PSNR (dB)")
            ax.set_xscale("log")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "psnr-vs-memory", "Test PSNR against static memory and render allocations, mean ± std")
        shown = grid.raw[()][0].get("_plots", {}).get("renders", {})
        if shown:
            fig, axes = plt.subplots(1, len(shown), figsize=(2.6 * len(shown), 2.9), squeeze=False)
            for ax, (lab, img) in zip(axes[0], shown.items()):
                ax.imshow(np.clip(np.asarray(img), 0, 1))
                ax.set_title(lab if lab != "target" else "ground truth", fontsize=6)
                ax.axis("off")
            fig.tight_layout()
            self.ctx.save_plot(fig, "renders", f"Seed 0, a test view: each method at the {pct[0]} budget")

    def evaluate(self) -> dict[str, Any]:
        return {}


class _AllocatedBytes(TorchDispatchMode):
    """Sums the bytes of every tensor an op returns that does not share storage with its inputs."""

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {
            t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.total += t.numel() * t.element_size()
        return out


def _pct(b: float) -> str:
    return f"{round(100 * b)}%"


def _test_views(sc: dict) -> list[int]:
    return [i for i in range(len(sc["cameras"])) if bool(sc["test"][i])]


def _image(img: torch.Tensor) -> list:
    return np.round(img.clamp(0, 1).cpu().numpy(), 3).tolist()
