"""Benchmarks (`agentkit bench ...`): each compares against a baseline run in the same process."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentkit.registry import Registry

# `agentkit bench NAME`: a module with HELP (one line), add_arguments(parser), main(**options) -> exit code, whose
# parameters are its options' names, and ratios(result) -> {label: (value, "higher" | "lower": which is better)},
# what `bench summary` prints and `bench compare` checks; report(result) -> markdown, where it has a block on the
# benchmarks page (`bench page`); third parties add theirs under the entry-point group agentkit.benches.
BENCHES: Registry[Any] = Registry("benchmark", group="agentkit.benches")
for _name in ("engine", "agent", "serve", "structured", "toollight-sampling", "uncertainty", "tips-potentials",
              "rl-step", "ace", "revela", "gamerl-verify", "sandbox", "weight-sync"):  # fmt: skip
    BENCHES.register(_name, "agentkit.eval.bench." + _name.replace("-", "_"))


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile (0 ≤ q ≤ 1) of ``xs``, linearly interpolated (numpy's default): the p50/p95 of every
    latency the benchmarks and recipes report."""
    import numpy as np

    return float(np.percentile(np.asarray(xs, dtype=float), 100 * q))


def _commit() -> str | None:
    """The checkout's commit, with ``+dirty`` when tracked files had changes; None outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else None


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), platform.processor())


def provenance() -> dict[str, Any]:
    """Where a measurement came from (stored with every benchmark's JSON): the command, the commit, the machine
    (CPU model and cores, memory, GPU, torch and its threads) and the time."""
    import torch

    cpu = _cpu_model()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 if hasattr(os, "sysconf") else None
    return {
        "command": "agentkit " + " ".join(sys.argv[1:])
        if Path(sys.argv[0]).name in ("agentkit", "__main__.py")
        else " ".join(sys.argv),
        "commit": _commit(),
        "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": {
            "cpu": cpu,
            "cores": os.cpu_count(),
            "memory_gib": round(mem, 1) if mem else None,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
        },
    }


def write_json(out: str | None, result: dict[str, Any]) -> None:
    """Write a benchmark's result as JSON (atomically) when ``--out`` was given, with its ``provenance``."""
    if out:
        from agentkit.files import atomic_write

        atomic_write(Path(out), json.dumps({**result, "provenance": provenance()}, indent=2))


Ratios = dict[str, tuple[float, str]]


def _results(path: Path) -> dict[str, dict[str, Any]]:
    """Bench name → result, from one ``NAME.json`` or every such file of a folder (names not registered are
    skipped; a file that is not a result is an error naming it)."""
    from agentkit.errors import AgentkitError

    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not path.exists():
        raise AgentkitError(f"{path} does not exist", "give a bench result (NAME.json) or a folder of them")
    out = {}
    for f in files:
        if f.stem not in BENCHES.names():
            continue
        try:
            out[f.stem] = json.loads(f.read_text())
        except (OSError, ValueError) as e:
            raise AgentkitError(f"{f}: not a bench result ({e})") from None
    return out


def ratios_of(name: str, result: dict[str, Any]) -> Ratios:
    """The ratios bench ``name`` declares for one of its results (empty for a bench that declares none)."""
    module = BENCHES.get(name)
    return module.ratios(result) if hasattr(module, "ratios") else {}


def summary(path: str | Path) -> list[dict[str, Any]]:
    """One row per ratio of every result under ``path``: bench, ratio, value, which way is better, commit, machine.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / "sandbox.json").write_text(json.dumps(
    ...     {"speedup_p50": 4.8, "sandbox": {"p50_ms": 6.3, "p95_ms": 13.9}, "provenance": {"commit": "abc"}}))
    >>> [(r["ratio"], r["value"], r["better"]) for r in summary(d)][0]
    ('p50: python -c / sandbox', 4.8, 'higher')
    """
    rows = []
    for name, res in _results(Path(path)).items():
        prov = res.get("provenance", {})
        machine = prov.get("machine", {})
        where = f"{machine.get('cpu', '?')}, {machine.get('torch_threads', '?')} threads" if machine else "?"
        for label, (value, better) in ratios_of(name, res).items():
            rows.append({"bench": name, "ratio": label, "value": value, "better": better,
                         "commit": prov.get("commit"), "machine": where})  # fmt: skip
    return rows


def compare(old: str | Path, new: str | Path, margin: float = 0.1) -> list[dict[str, Any]]:
    """Every ratio present in both ``old`` and ``new`` (files or folders of results), with ``fell`` True where it
    moved the worse way by more than ``margin`` (relative: 0.1 = 10 %).

    >>> import tempfile; d = Path(tempfile.mkdtemp()); (d / "a").mkdir(); (d / "b").mkdir()
    >>> for sub, x in (("a", 4.8), ("b", 3.9)):
    ...     _ = (d / sub / "sandbox.json").write_text(json.dumps({"speedup_p50": x, "sandbox": {"p50_ms": 6, "p95_ms": 14}}))
    >>> [(r["ratio"], r["change"], r["fell"]) for r in compare(d / "a", d / "b")][0]
    ('p50: python -c / sandbox', -0.188, True)
    """
    before, after = _results(Path(old)), _results(Path(new))
    rows = []
    for name in sorted(before.keys() & after.keys()):
        was, now = ratios_of(name, before[name]), ratios_of(name, after[name])
        for label in [k for k in was if k in now]:
            (a, better), (b, _) = was[label], now[label]
            change = (b - a) / abs(a) if a else 0.0
            fell = change < -margin if better == "higher" else change > margin
            rows.append({"bench": name, "ratio": label, "old": a, "new": b, "better": better,
                         "change": round(change, 3), "fell": fell})  # fmt: skip
    return rows


PAGE = Path("docs/benchmarks.md")
RESULTS = Path("docs/results/bench")
_BLOCK = re.compile(r"(<!-- bench:([a-z0-9-]+) -->\n)(.*?)(<!-- /bench:\2 -->)", re.S)


def provenance_line(res: dict[str, Any], file: str | None = None) -> str:
    """The italic line above a result's tables: command, commit, time and machine (and a link to the file).

    >>> provenance_line({"provenance": {"command": "agentkit bench ace", "commit": "abc", "time_utc": "2026-12-06 07:31",
    ...     "machine": {"cpu": "AMD EPYC", "cores": 2, "memory_gib": 23.5, "gpu": None, "torch": "2.13.0+cpu",
    ...     "torch_threads": 2}}})
    '*`agentkit bench ace` · commit abc · 2026-12-06 07:31 UTC · 2-core AMD EPYC, 24 GiB, no GPU, torch 2.13.0+cpu (2 threads)*'
    """
    p = res.get("provenance", {})
    m = p.get("machine", {})
    machine = (
        f"{m.get('cores')}-core {m.get('cpu')}, {m.get('memory_gib') or 0:.0f} GiB, {m.get('gpu') or 'no GPU'}, "
        f"torch {m.get('torch')} ({m.get('torch_threads')} thread{'s' if m.get('torch_threads') != 1 else ''})"
    )
    line = f"*`{p.get('command')}` · commit {p.get('commit')} · {p.get('time_utc')} UTC · {machine}*"
    return line + (f" ([file]({file}))" if file else "")


def render_page(page: Path = PAGE, results: Path = RESULTS) -> str:
    """``page`` with every ``<!-- bench:NAME -->`` … ``<!-- /bench:NAME -->`` block rewritten from
    ``results/NAME.json``: the provenance line, then the bench's ``report(result)`` (markdown tables and the
    sentences that quote figures), so no figure in a block is copied by hand."""
    from agentkit.errors import AgentkitError

    text = page.read_text()

    def block(m: re.Match) -> str:
        name = m.group(2)
        file = results / f"{name}.json"
        if not file.is_file():
            raise AgentkitError(
                f"{page}: block bench:{name} has no result {file}", f"run agentkit bench {name} --out {file}"
            )
        res = json.loads(file.read_text())
        link = os.path.relpath(file, page.parent)
        body = provenance_line(res, link) + "\n\n" + BENCHES.get(name).report(res).strip() + "\n"
        return m.group(1) + body + m.group(4)

    return _BLOCK.sub(block, text)
