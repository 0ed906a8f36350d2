"""extras.physics.atom: ATOM, a graph-free transformer neural operator that decodes 8 future frames of molecular
dynamics at once, against EGNO, an autoregressive EGNN and constant velocity. The data are MMFF94 trajectories of
the MD17 molecules simulated here (RDKit + ASE, ``md.py``), cached per seed in the run folder; the models train on
6 molecules at several frame spacings and are tested on new trajectories of those and zero-shot on the other 2."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.nets import timed, warmup_cosine
from agentkit.extras.physics.atom import md
from agentkit.extras.physics.atom.config import AtomConfig
from agentkit.extras.physics.atom.model import ATOM, EGNN, EGNO, constant_velocity, edge_features, random_rotations
from agentkit.extras.sweep import stage, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "atom": "ATOM",
    "egno": "EGNO",
    "egnn": "EGNN (autoregressive)",
    "constvel": "constant velocity",
    "static": "static (x_t = x_0)",
}
TRAINED = ("atom", "egno", "egnn")
SPLITS = {"id": "new trajectories of the training molecules", "zs": "zero-shot molecules"}
MILLI = 1000.0  # MSEs are reported in 10⁻³ Å²


class AtomRecipe(Recipe[AtomConfig]):
    name = "extras.physics.atom"
    config_cls = AtomConfig
    description = (
        "ATOM: graph-free quasi-equivariant neural operator for MD vs EGNO / autoregressive EGNN / const. velocity"
    )

    def setup(self) -> None:
        for module, what in (("rdkit", "RDKit"), ("ase", "ASE"), ("e3nn", "e3nn")):
            data.require(module, "physics", f"extras.physics.atom needs {what}")

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._run, desc="seeds (every model)")
        res = {lab: per for lab, per in grid.nested(()).items() if lab in LABELS.values()}
        dts = [_dt(d) for d in c.dt_fs]
        cols = {s: [f"mse_{s}@{d}" for d in dts] + [f"mse_{s}"] for s in SPLITS}
        sections = []
        for s, what in SPLITS.items():
            sections.append(
                f"**{what}** ({', '.join(c.train_molecules if s == 'id' else c.zero_shot_molecules)}): position MSE "
                f"over the {c.frames} predicted frames (10⁻³ Å² per coordinate), at each Δt and their mean\n\n"
                + report.table(res, cols[s], digits=2)
                + "\n\n"
                + report.paired(res, LABELS["egno"], cols[s], digits=2)
            )
        extra = ["mse_rot_id", "equiv_err", "ms_per_window", "val_mse", "params"]
        self.ctx.add_section(
            f"{c.seeds} seeds",
            f"MMFF94 dynamics (RDKit + ASE) of {len(c.train_molecules)} training and {len(c.zero_shot_molecules)} "
            f"zero-shot MD17 molecules at {c.temperature[0]:.0f}–{c.temperature[1]:.0f} K, velocity Verlet at "
            f"{c.timestep_fs} fs after Langevin equilibration; every model predicts the positions {c.frames} "
            f"frames ahead at each Δt ∈ {{{', '.join(dts)}}} from the present positions and velocities, "
            f"{c.eval_windows} test windows per molecule and Δt; {c.steps} training steps each, the checkpoint kept "
            "on validation trajectories.\n\n"
            + "\n\n".join(sections)
            + "\n\nRotations and cost: mse_rot_id, the ID test MSE (10⁻³ Å², mean over Δt) with every window rotated "
            "at random; equiv_err, ‖f(Rx, Rv) − R f(x, v)‖² per coordinate (10⁻³ Å²; 0 for an exactly equivariant "
            f"model up to float error); ms_per_window, the wall time to predict all {c.frames} frames of one aspirin "
            f"window in a batch of {c.eval_windows} ({c.device}, median of 3), ATOM's and EGNO's in one pass, the "
            "EGNN's as a rollout; val_mse, the kept checkpoint's validation MSE; params, trainable parameters.\n\n"
            + report.table(res, extra, digits=3),
        )
        self._plot(grid, res)
        return report.means(res, [f"mse_{s}" for s in SPLITS] + ["equiv_err"])

    # ---- data --------------------------------------------------------------------------------------------------
    def _simulate(self, seed: int) -> dict[str, dict[str, dict[str, np.ndarray]]]:
        """Every trajectory of one seed: train / val / test of each training molecule, test of each zero-shot
        one; each at its own temperature and conformer."""
        c = self.config
        rng = np.random.default_rng(seed)
        plan = [(m, s) for m in c.train_molecules for s in ("train", "val", "test")]
        plan += [(m, "test") for m in c.zero_shot_molecules]
        out: dict[str, dict[str, dict[str, np.ndarray]]] = {}
        for i, (m, split) in enumerate(self.ctx.progress(plan, f"MMFF94 dynamics (seed {seed})")):
            temp = float(rng.uniform(*c.temperature))
            tr = md.simulate(
                m,
                c.train_frames if split == "train" else c.eval_frames,
                c.record_every,
                temp,
                c.timestep_fs,
                c.equilibrate,
                seed=1000 * seed + i,
            )
            tr["temperature"] = np.float64(temp)
            out.setdefault(m, {})[split] = tr
        return out

    def _windows(self, traj: dict[str, np.ndarray], dt: float, n: int):
        """``n`` windows of ``traj`` at spacing ``dt``, evenly spread: present ``(x, v) [n, N, 3]``, future
        positions ``[n, P, N, 3]`` and the velocities one step on ``[n, N, 3]``."""
        c = self.config
        k = round(dt / (c.timestep_fs * c.record_every))
        last = len(traj["positions"]) - c.frames * k - 1
        starts = np.linspace(0, last, n).round().astype(int)
        return _window(traj, starts, k, c.frames, self._atoms(traj))

    def _atoms(self, traj: dict[str, np.ndarray]) -> np.ndarray:
        """The atoms the models see: the heavy ones (``heavy_atoms``) or all."""
        return np.flatnonzero(traj["z"] > 1) if self.config.heavy_atoms else np.arange(len(traj["z"]))

    # ---- one seed ----------------------------------------------------------------------------------------------
    def _run(self, seed: int) -> dict[str, Any]:
        c = self.config
        trajs = stage(self.ctx, f"seed{seed}-md", lambda: self._simulate(seed))
        evals = {
            split: {
                (m, dt): self._windows(trajs[m]["val" if split == "val" else "test"], dt, c.eval_windows)
                for m in (c.zero_shot_molecules if split == "zs" else c.train_molecules)
                for dt in c.dt_fs
            }
            for split in ("val", "id", "zs")
        }
        graph = {}
        for m, t in trajs.items():
            keep = self._atoms(t["test"])
            graph[m] = (
                torch.from_numpy(t["test"]["z"][keep]),
                torch.from_numpy(t["test"]["bonds"][np.ix_(keep, keep)]),
            )
        out: dict[str, Any] = {}
        curves: dict[str, Any] = {}
        for method in c.methods:
            net, row = None, {}
            curves[LABELS[method]] = {}
            if method in TRAINED:
                fit = stage(
                    self.ctx, f"seed{seed}-{method}", lambda m=method: self._fit(m, trajs, graph, evals["val"], seed)
                )
                net = self._net(method)
                net.load_state_dict(fit["state"])
                net.eval()
                row = {"val_mse": fit["val_mse"] * MILLI, "params": fit["params"]}
                curves[LABELS[method]]["losses"] = fit["losses"]
            for split in SPLITS:
                per = {dt: self._horizon_mse(method, net, evals[split], graph, dt) for dt in c.dt_fs}
                for dt, h in per.items():
                    row[f"mse_{split}@{_dt(dt)}"] = float(np.mean(h)) * MILLI
                    curves[LABELS[method]][f"{split}@{_dt(dt)}"] = [float(v) * MILLI for v in h]
                row[f"mse_{split}"] = float(np.mean([row[f"mse_{split}@{_dt(dt)}"] for dt in c.dt_fs]))
            row["mse_rot_id"], row["equiv_err"] = self._rotated(method, net, evals["id"], graph, seed)
            row["ms_per_window"] = self._timing(method, net, evals["id"], graph)
            out[LABELS[method]] = row
        out["_plots"] = {"curves": curves}
        return out

    def _net(self, method: str) -> torch.nn.Module:
        c = self.config
        if method == "atom":
            net = ATOM(c.dim, c.blocks, c.heads, tau=min(c.dt_fs))
        elif method == "egno":
            net = EGNO(c.hidden, c.layers, c.frames, c.modes)
        else:
            net = EGNN(c.hidden, c.layers)
        return net.to(c.device)

    def _predict(self, method: str, net, x, v, z, bonds, dt: float) -> torch.Tensor:
        """Positions ``[B, P, N, 3]`` at ``dt, 2·dt, …`` from ``x, v [B, N, 3]``."""
        times = dt * torch.arange(1, self.config.frames + 1, dtype=x.dtype, device=x.device)
        if method == "atom":
            return net(x, v, z, times)
        if method == "egno":
            return net(x, v, z, times, bonds)
        if method == "egnn":
            return net.rollout(x, v, z, dt, self.config.frames, bonds)
        if method == "static":
            return x[:, None].expand(-1, len(times), -1, -1)
        return constant_velocity(x, v, times)

    def _fit(self, method: str, trajs, graph, val, seed: int) -> dict[str, Any]:
        c = self.config
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed)
        net = self._net(method)
        opt = torch.optim.Adam(net.parameters(), lr=c.lr)
        sched = warmup_cosine(opt, c.steps)
        every = max(1, c.steps // c.evals)
        dev = c.device
        losses, best = [], (float("inf"), None)
        for step in self.ctx.progress(range(c.steps), f"{LABELS[method]} (seed {seed})"):
            m = c.train_molecules[int(torch.randint(len(c.train_molecules), (1,), generator=g))]
            dt = c.dt_fs[int(torch.randint(len(c.dt_fs), (1,), generator=g))]
            tr = trajs[m]["train"]
            k = round(dt / (c.timestep_fs * c.record_every))
            starts = torch.randint(len(tr["positions"]) - c.frames * k - 1, (c.batch,), generator=g).numpy()
            x, v, y, v1 = _window(tr, starts, k, c.frames, self._atoms(tr))
            if c.rotate:
                r = random_rotations(c.batch, g)
                x, v, y, v1 = (_rotate(r, a) for a in (x, v, y, v1))
            x = x + c.noise * torch.randn(x.shape, generator=g)
            z, bonds = (a.to(dev) for a in graph[m])
            x, v, y, v1 = (a.to(dev) for a in (x, v, y, v1))
            if method == "egnn":  # one step Δt ahead: positions, and the velocities the rollout continues from
                px, pv = net.step(x, v, z, dt, edge_features(x, bonds))
                loss = (px - y[:, 0]).pow(2).mean() + ((pv - v1) * dt).pow(2).mean()
            else:
                loss = (self._predict(method, net, x, v, z, bonds, dt) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            if (step + 1) % every == 0 or step + 1 == c.steps:
                net.eval()
                vm = float(np.mean([np.mean(self._horizon_mse(method, net, val, graph, dt)) for dt in c.dt_fs]))
                net.train()
                if vm < best[0]:
                    best = (vm, {k: t.detach().cpu().clone() for k, t in net.state_dict().items()})
        return {
            "state": best[1],
            "val_mse": best[0],
            "params": sum(p.numel() for p in net.parameters()),
            "losses": report.thin(losses),
        }

    @torch.no_grad()
    def _horizon_mse(self, method: str, net, windows, graph, dt: float) -> list[float]:
        """MSE per predicted frame (Å² per coordinate), over every molecule's windows at ``dt``."""
        dev = self.config.device
        per = []
        for (m, d), (x, v, y, _) in windows.items():
            if d != dt:
                continue
            z, bonds = (a.to(dev) for a in graph[m])
            p = self._predict(method, net, x.to(dev), v.to(dev), z, bonds, dt).cpu()
            per.append((p - y).pow(2).mean(dim=(0, 2, 3)))
        return torch.stack(per).mean(0).tolist()

    @torch.no_grad()
    def _rotated(self, method: str, net, windows, graph, seed: int) -> tuple[float, float]:
        """(the test MSE with each window rotated at random, ‖f(Rx, Rv) − R f(x, v)‖² per coordinate), both in
        10⁻³ Å², means over molecules and Δt."""
        dev = self.config.device
        g = torch.Generator().manual_seed(50_000 + seed)
        mse, err = [], []
        for (m, dt), (x, v, y, _) in windows.items():
            z, bonds = (a.to(dev) for a in graph[m])
            r = random_rotations(len(x), g)
            p = self._predict(method, net, x.to(dev), v.to(dev), z, bonds, dt).cpu()
            pr = self._predict(method, net, _rotate(r, x).to(dev), _rotate(r, v).to(dev), z, bonds, dt).cpu()
            mse.append(float((pr - _rotate(r, y)).pow(2).mean()))
            err.append(float((pr - _rotate(r, p)).pow(2).mean()))
        return float(np.mean(mse)) * MILLI, float(np.mean(err)) * MILLI

    @torch.no_grad()
    def _timing(self, method: str, net, windows, graph) -> float:
        """Milliseconds per window to predict every frame of the largest test molecule's windows at the first Δt
        (median of 3)."""
        c = self.config
        m = max(c.train_molecules, key=lambda k: len(graph[k][0]))
        x, v, _, _ = windows[(m, c.dt_fs[0])]
        z, bonds = (a.to(c.device) for a in graph[m])
        x, v = x.to(c.device), v.to(c.device)
        times = [timed(lambda: self._predict(method, net, x, v, z, bonds, c.dt_fs[0]), x.is_cuda)[1] for _ in range(3)]
        return float(np.median(times)) / len(x) * 1000

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, res) -> None:
        c = self.config
        plt = pyplot()
        runs = [r.get("_plots", {}).get("curves", {}) for r in grid.raw[()]]
        dts = [_dt(d) for d in c.dt_fs]
        fig, axes = plt.subplots(2, len(dts), figsize=(4.2 * len(dts), 7), squeeze=False)
        hs = list(range(1, c.frames + 1))
        for i, s in enumerate(SPLITS):
            for j, d in enumerate(dts):
                ax = axes[i, j]
                for lab in res:
                    vals = [r[lab][f"{s}@{d}"] for r in runs if lab in r]
                    if vals:
                        report.curve(ax, hs, [list(col) for col in zip(*vals)], lab)
                ax.set_yscale("log")
                ax.set_title(f"{'ID test' if s == 'id' else 'zero-shot'}, Δt = {d}", fontsize=9)
                ax.set_xlabel("predicted frame k (t_0 + k·Δt)")
                ax.set_ylabel("position MSE (10⁻³ Å²)")
        axes[0, 0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "error-vs-horizon", "Position MSE against the predicted frame, mean ± std over seeds")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _dt(dt: float) -> str:
    return f"{dt:g}fs"


def _window(traj: dict[str, np.ndarray], starts: np.ndarray, k: int, frames: int, atoms: np.ndarray):
    """Present ``x, v [n, N, 3]``, positions at the next ``frames`` frames ``k`` records apart ``[n, P, N, 3]``,
    and velocities one step on ``[n, N, 3]``, of the ``atoms`` kept."""
    pos = torch.from_numpy(traj["positions"][:, atoms])
    vel = torch.from_numpy(traj["velocities"][:, atoms])
    s = torch.as_tensor(starts)
    ahead = s[:, None] + k * torch.arange(1, frames + 1)
    return pos[s], vel[s], pos[ahead], vel[s + k]


def _rotate(r: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Rotate the vectors of ``a [B, ..., 3]`` by ``r [B, 3, 3]`` (one rotation per sample)."""
    return torch.einsum("bij,b...j->b...i", r, a)
