"""Processes seen from the host, by what their command line holds: tests use it to find what outlived its
sandbox, server or run."""

from __future__ import annotations

import os
import time


def processes(*markers: str) -> dict[int, str]:
    """pid → command line (arguments joined by spaces) of every other process whose command line contains one
    of ``markers``."""
    found = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(name) != os.getpid() and any(m in cmd for m in markers):
            found[int(name)] = cmd
    return found


def gone(*markers: str, seconds: float = 3.0) -> bool:
    """Whether every process matching ``markers`` has exited within ``seconds`` (killed trees take a moment)."""
    deadline = time.monotonic() + seconds
    while processes(*markers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not processes(*markers)


def launch_two_processes(args: list[str], root, timeout: float = 600, config: str = "cpu", **popen):
    """``accelerate launch`` of ``python -m agentkit <args>`` on two CPU processes (gloo), run from ``root``, with
    ``configs/accelerate/<config>.yaml`` under ``root``: ``cpu`` (DDP), or a GPU config run on the CPU with two
    processes in fp32 (``zero2``, ``zero3``: DeepSpeed's CPU accelerator). The finished ``CompletedProcess``, its
    output captured as text; with ``popen`` (e.g. ``start_new_session``), the started ``Popen`` instead."""
    import subprocess
    import sys
    from pathlib import Path

    path = Path(root) / "configs" / "accelerate" / f"{config}.yaml"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(path)]
    if config != "cpu":
        cmd += ["--num_processes", "2", "--mixed_precision", "no"]
    cmd += ["-m", "agentkit", *args]
    if popen:
        return subprocess.Popen(cmd, cwd=root, **popen)
    import os
    import signal

    proc = subprocess.Popen(
        cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and every process it started: none outlives the test
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
