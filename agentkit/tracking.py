"""Experiment tracking for every recipe (``agentkit run RECIPE --report-to tensorboard,mlflow``): the trainers'
own logs (TRL / transformers ``report_to``) and our metrics (``RunContext.log``, mirrored), to the same trackers,
written inside the run directory and offline, so nothing leaves the machine:

==============  =============================================  ===============================================
tracker         where it writes                                read it with
==============  =============================================  ===============================================
``tensorboard`` ``RUN/tensorboard/<name>`` (``agentkit``: ours;  ``tensorboard --logdir RUN/tensorboard``
                a trainer's: its run name)
``mlflow``      ``RUN/mlruns`` (a local file store)             ``mlflow ui --backend-store-uri RUN/mlruns``
``wandb``       ``RUN/wandb`` (offline mode)                   ``wandb sync RUN/wandb/offline-run-*``
``trackio``     ``RUN/trackio`` (its local store)              ``TRACKIO_DIR=RUN/trackio trackio show``
==============  =============================================  ===============================================

The trackers' packages are optional (``pip install 'agentkit[tracking]'``); a tracker whose package is missing is
one error naming it before the run starts. Only the main process reports. trackio fixes its store's folder when
it is imported, so a run that reports to it must be the first thing in its process to import it (else one error).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import Any

from agentkit.errors import AgentkitError, did_you_mean

TRACKERS: dict[str, str] = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb", "trackio": "trackio"}


def parse_report_to(value: str | list[str] | None) -> list[str]:
    """``"tensorboard,mlflow"`` (or a list) checked: known names, each package importable; ``none``/empty: [].

    >>> parse_report_to("none"), parse_report_to(None)
    ([], [])
    """
    names = [n.strip() for n in (value.split(",") if isinstance(value, str) else value or []) if n.strip()]
    if names in (["none"], []):
        return []
    for n in names:
        if n not in TRACKERS:
            raise AgentkitError(f"--report-to: unknown tracker {n!r}", did_you_mean(n, TRACKERS))
        if importlib.util.find_spec(TRACKERS[n]) is None:  # found, not imported: trackio fixes its store on import
            raise AgentkitError(
                f"--report-to {n}: the {TRACKERS[n]} package is not installed", "pip install 'agentkit[tracking]'"
            )
    if "trackio" in names and "trackio.utils" in sys.modules:
        where = sys.modules["trackio.utils"].TRACKIO_DIR
        raise AgentkitError(
            f"--report-to trackio: trackio was imported in this process before the run, with its store at {where} "
            "(it fixes the store when imported), so the run's metrics could not go to RUN/trackio",
            "run it in a new process (agentkit run …)",
        )
    return list(dict.fromkeys(names))


class Tracking:
    """A run's trackers: ``log`` mirrors our metrics; ``trainer_kwargs`` is what a trainer's config takes.

    Args:
        run_dir: the run directory (the trackers write inside it).
        names: the trackers (``parse_report_to``).
        experiment: the experiment's name (the recipe's).
    """

    def __init__(self, run_dir: Path, names: list[str], experiment: str):
        self.run_dir, self.names, self.experiment = Path(run_dir), list(names), experiment
        self._writers: dict[str, Any] = {}
        self._step = 0
        self._trainer_runs: dict[str, int] = {}
        if not names:
            return
        os.environ.setdefault("WANDB_MODE", "offline")  # the trainers' callbacks read these
        os.environ["WANDB_DIR"] = str(self.run_dir)
        os.environ.setdefault("WANDB_PROJECT", f"agentkit-{experiment}")
        os.environ["MLFLOW_TRACKING_URI"] = mlflow_uri(self.run_dir)
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        os.environ["MLFLOW_EXPERIMENT_NAME"] = experiment
        os.environ["TRACKIO_DIR"] = str(self.run_dir / "trackio")
        os.environ.setdefault("TRACKIO_PROJECT", f"agentkit-{experiment}")

    # ---- our metrics --------------------------------------------------------------------------------------
    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """The numbers of one metrics row, at ``step`` (rows without one count up on their own)."""
        values = {
            _key(k): float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        if not values or not self.names:
            return
        if step is None:
            self._step += 1
            step = self._step
        for name in self.names:
            getattr(self, f"_log_{name}")(values, step)

    def _log_tensorboard(self, values: dict[str, float], step: int) -> None:
        w = self._writers.get("tensorboard")
        if w is None:
            from torch.utils.tensorboard import SummaryWriter

            w = self._writers["tensorboard"] = SummaryWriter(str(self.run_dir / "tensorboard" / "agentkit"))
        for k, v in values.items():
            w.add_scalar(k, v, step)
        w.flush()

    def _log_mlflow(self, values: dict[str, float], step: int) -> None:
        import mlflow

        if "mlflow" not in self._writers:
            mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
            mlflow.set_experiment(self.experiment)
            self._writers["mlflow"] = mlflow.start_run(run_name="agentkit", nested=mlflow.active_run() is not None)
        # the file store keeps a metric per file: "a" and "a/b" cannot both be there, so "/" becomes "."
        flat = {k.replace("/", "."): v for k, v in values.items()}
        mlflow.log_metrics(flat, step=step, run_id=self._writers["mlflow"].info.run_id)

    def _log_wandb(self, values: dict[str, float], step: int) -> None:
        import wandb

        if "wandb" not in self._writers:
            self._writers["wandb"] = wandb.init(
                project=os.environ["WANDB_PROJECT"],
                dir=str(self.run_dir),
                name="agentkit",
                mode="offline",
                reinit="create_new",
            )
        self._writers["wandb"].log({**values, "agentkit/step": step})

    def _log_trackio(self, values: dict[str, float], step: int) -> None:
        import trackio

        if "trackio" not in self._writers:
            self._writers["trackio"] = trackio.init(project=os.environ["TRACKIO_PROJECT"], name="agentkit")
        trackio.log(values, step=step)

    # ---- the trainers' ------------------------------------------------------------------------------------
    def trainer_kwargs(self, name: str) -> dict[str, Any]:
        """``report_to`` and ``run_name`` for a TRL / transformers config, its TensorBoard folder
        ``tensorboard/<name>`` (``<name>-2``… when a run trains under one name again)."""
        if not self.names:
            return {"report_to": []}
        n = self._trainer_runs[name] = self._trainer_runs.get(name, 0) + 1
        run = name if n == 1 else f"{name}-{n}"
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(self.run_dir / "tensorboard" / run)
        return {"report_to": list(self.names), "run_name": run}

    def close(self) -> None:
        for name, w in self._writers.items():
            try:
                if name == "tensorboard":
                    w.close()
                elif name == "mlflow":
                    import mlflow

                    mlflow.end_run()
                elif name == "wandb":
                    w.finish()
                elif name == "trackio":
                    import trackio

                    trackio.finish()
            except Exception:  # noqa: BLE001 - a tracker failing to close must not fail the run
                pass
        self._writers.clear()


def mlflow_uri(run_dir: Path) -> str:
    """The run's MLflow store: a local file store in the run directory (MLflow 3 keeps it in maintenance and asks
    for ``MLFLOW_ALLOW_FILE_STORE``, set here; its SQLite store needs the full ``mlflow``, not ``mlflow-skinny``)."""
    return (Path(run_dir) / "mlruns").resolve().as_uri()


def _key(name: str) -> str:
    """A metric's name as every tracker takes it (MLflow: letters, digits and ``_-./ ``)."""
    return re.sub(r"[^\w\-./ ]", "_", str(name))


_ACTIVE: Tracking | None = None  # the run of this process (one at a time), for trainers built deep in a recipe


def activate(tracking: Tracking | None) -> None:
    global _ACTIVE
    _ACTIVE = tracking


def trainer_kwargs(name: str) -> dict[str, Any]:
    """What a trainer's config takes to report where this run reports (``{"report_to": []}`` outside a run or
    without trackers): the one place the recipes' trainers get ``report_to``."""
    return _ACTIVE.trainer_kwargs(name) if _ACTIVE is not None else {"report_to": []}
