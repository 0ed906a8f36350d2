"""extras.tabular.jarf: JARF (EGOP-preconditioned random forest) against axis-aligned and oblique baselines on
rotated-boundary synthetic data and scikit-learn's bundled sets; Cohen's κ and fit time over seeds."""

from __future__ import annotations

import time
from typing import Any

from agentkit.extras import data, report
from agentkit.extras.sweep import product, sweep
from agentkit.extras.tabular.jarf.config import JARFConfig
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

METHODS = ("RF", "PCA+RF", "LDA+RF", "RotationRF", "JARF")


class JARFRecipe(Recipe[JARFConfig]):
    name = "extras.tabular.jarf"
    config_cls = JARFConfig
    description = "JARF vs RF, PCA+RF, LDA+RF and a random-rotation forest: Cohen's kappa and fit time"

    def setup(self) -> None:
        unknown = [m for m in self.config.methods if m not in METHODS]
        if unknown:
            from agentkit.errors import AgentkitError

            raise AgentkitError(f"methods: unknown {unknown}", f"choose from {', '.join(METHODS)}")

    def train(self) -> dict[str, Any]:
        c = self.config
        sets = [f"rotated θ={t:g}°" for t in c.thetas] + list(c.datasets)
        grid = sweep(self.ctx, product(sets, c.methods), c.seeds, self._fit, name="fits", desc="fits")
        metrics: dict[str, Any] = {}
        for s, part in grid.split().items():
            res = part.results()
            metrics |= report.means(res, ["kappa"], f"{s}/")
            baseline = report.paired(res, c.methods[0], ["kappa", "accuracy"])
            self.ctx.add_section(f"{s}", report.table(res, ["kappa", "accuracy", "fit_s"]) + "\n\n" + baseline)
        self._plot(sets, grid)
        return metrics

    def _fit(self, dataset: str, method: str, seed: int) -> dict[str, float]:
        from sklearn.metrics import accuracy_score, cohen_kappa_score
        from sklearn.model_selection import train_test_split

        x, y = self._data(dataset, seed)
        xa, xb, ya, yb = train_test_split(x, y, test_size=self.config.test_size, stratify=y, random_state=seed)
        model = _model(method, self.config, seed)
        t0 = time.perf_counter()
        model.fit(xa, ya)
        fit_s = time.perf_counter() - t0
        pred = model.predict(xb)
        return {"kappa": cohen_kappa_score(yb, pred), "accuracy": accuracy_score(yb, pred), "fit_s": fit_s}

    def _data(self, dataset: str, seed: int):
        c = self.config
        if dataset.startswith("rotated"):
            theta = float(dataset.split("=")[1].rstrip("°"))
            return data.rotated_classification(c.n_samples, c.n_features, theta, seed=seed)
        return data.sklearn_set(dataset)

    def _plot(self, sets: list[str], grid) -> None:
        plt = pyplot()

        c = self.config
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [1, 1.3]})
        rot = [s for s in sets if s.startswith("rotated")]
        for m in c.methods:
            means, sds = zip(*(report.mean_std([r["kappa"] for r in grid.raw[(s, m)]]) for s in rot))
            axes[0].errorbar(c.thetas, means, yerr=sds, marker="o", capsize=3, label=m)
        axes[0].set_xlabel("rotation θ (degrees)")
        axes[0].set_ylabel("Cohen's κ (test)")
        axes[0].set_title("rotated boundary")
        axes[0].legend(fontsize=7)
        real = [s for s in sets if not s.startswith("rotated")]
        width = 0.8 / len(c.methods)
        for i, m in enumerate(c.methods):
            stats = [report.mean_std([r["kappa"] for r in grid.raw[(s, m)]]) for s in real]
            axes[1].bar(
                [j + i * width for j in range(len(real))],
                [a for a, _ in stats],
                yerr=[b for _, b in stats],
                width=width,
                capsize=2,
                label=m,
            )
        axes[1].set_xticks([j + 0.4 - width / 2 for j in range(len(real))])
        axes[1].set_xticklabels(real)
        axes[1].set_ylim(0.5, 1.0)
        axes[1].set_title("bundled sets")
        fig.tight_layout()
        self.ctx.save_plot(fig, "kappa", "Cohen's κ (mean ± std over seeds) per method")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _model(method: str, c: JARFConfig, seed: int):
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from agentkit.extras.tabular.jarf.model import JARFClassifier, RandomRotationForest

    rf = RandomForestClassifier(c.n_estimators, random_state=seed)
    if method == "RF":
        return rf
    if method == "PCA+RF":  # all components: a data-driven rotation of the standardised inputs
        return make_pipeline(StandardScaler(), PCA(random_state=seed), rf)
    if method == "LDA+RF":  # the C − 1 discriminant directions
        return make_pipeline(StandardScaler(), LinearDiscriminantAnalysis(), rf)
    if method == "RotationRF":
        return RandomRotationForest(c.n_estimators, random_state=seed)
    return JARFClassifier(c.n_estimators, c.surrogate_estimators, random_state=seed)
