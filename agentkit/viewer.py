"""``agentkit view RUN_DIR``: a local web page of a run's trajectories.

Sources, found anywhere under the run directory:

- JSONL files of trajectories (``agentkit.agent.trajectory.save_jsonl``; the RL trainers' ``rollouts.p<N>.jsonl``,
  written every step with each trajectory's outcome, correctness and per-turn rewards and advantages);
- saved ``datasets`` folders with a ``trajectory`` column (``to_dataset``: Tool-Light's SFT trajectories and its
  rounds' samples, toollight_analyze's trajectories).

The page shows each trajectory's turns (model text, tool calls with their arguments, results and whether they
succeeded), the reward and advantage of each model turn where the run recorded them, and each model turn's token
entropies as a heat strip (white: 0 nats, dark red: 4 or more). It filters by correctness, by the number of tool
calls and by step; the filters are in the URL (``?source=0&correct=no&min_tools=1&step=3``), so a view can be
shared. The server binds to loopback; the run's files are only read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from agentkit.errors import AgentkitError

MAX_SOURCE_MB = 512  # a larger JSONL file is refused (the page loads a source whole)


@dataclass(frozen=True)
class Source:
    path: Path
    kind: str  # "jsonl" or "dataset"


def find_sources(run_dir: Path) -> list[Source]:
    """The trajectory files and datasets under ``run_dir``, in path order."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AgentkitError(f"{run_dir} is not a directory", "pass a run directory (outputs/<recipe>/<time>)")
    out = []
    for p in sorted(run_dir.rglob("*")):
        if p.is_file() and p.suffix == ".jsonl" and _is_trajectory_file(p):
            out.append(Source(p, "jsonl"))
        elif p.is_dir() and (p / "dataset_info.json").is_file() and _has_trajectory_column(p):
            out.append(Source(p, "dataset"))
    return out


def _is_trajectory_file(p: Path) -> bool:
    try:
        with open(p) as f:
            first = json.loads(f.readline() or "null")
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(first, dict) and "segments" in first and "task_id" in first


def _has_trajectory_column(p: Path) -> bool:
    try:
        info = json.loads((p / "dataset_info.json").read_text())
    except (OSError, ValueError):
        return False
    return "trajectory" in (info.get("features") or {})


def load(source: Source) -> list[dict[str, Any]]:
    """A source's trajectories as the page shows them (``view_row``); for RL rollouts, the last record of each
    (step, task, sample) wins (a resumed step is recorded again)."""
    if source.kind == "jsonl":
        if source.path.stat().st_size > MAX_SOURCE_MB * 2**20:
            raise AgentkitError(f"{source.path} is larger than {MAX_SOURCE_MB} MB", "view a smaller file")
        rows = []
        with open(source.path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        continue  # a line cut by a crash
    else:
        import datasets

        rows = [json.loads(r) for r in datasets.load_from_disk(str(source.path))["trajectory"]]
    latest: dict[tuple, dict[str, Any]] = {}
    for i, r in enumerate(rows):
        meta = r.get("meta") or {}
        key = (meta.get("step"), r.get("task_id"), meta.get("sample", i)) if "step" in meta else (i,)
        latest[key] = r
    return [view_row(r) for r in latest.values()]


def view_row(t: dict[str, Any]) -> dict[str, Any]:
    """One trajectory for the page: its fields, and its segments with each model turn's reward, advantage and
    entropies.

    >>> row = view_row({"task_id": "q1", "segments": [{"kind": "model", "text": "<python>1</python>",
    ...     "entropies": [0.5]}, {"kind": "tool", "text": "1", "tool": "python", "ok": True}],
    ...     "meta": {"correct": True, "turn_rewards": [1.0]}, "answer": "1", "finish": "answer"})
    >>> row["tools"], row["correct"], row["turns"][0]["reward"]
    (1, True, 1.0)
    """
    meta = t.get("meta") or {}
    rewards, advantages = meta.get("turn_rewards") or [], meta.get("turn_advantages") or []
    turns, k = [], 0
    for s in t.get("segments") or []:
        turn = {"kind": s.get("kind"), "text": s.get("text", "")}
        if s.get("kind") == "model":
            turn["entropies"] = s.get("entropies") or []
            turn["reward"] = rewards[k] if k < len(rewards) else None
            turn["advantage"] = advantages[k] if k < len(advantages) else None
            k += 1
        else:
            turn.update(tool=s.get("tool"), ok=s.get("ok"), arguments=s.get("arguments"))
        turns.append(turn)
    correct = meta.get("correct")
    if correct is None and isinstance(meta.get("em"), (int, float)):
        correct = meta["em"] >= 1.0
    return {
        "task_id": t.get("task_id"),
        "step": meta.get("step"),
        "sample": meta.get("sample"),
        "reward": meta.get("reward"),
        "correct": correct,
        "answer": t.get("answer"),
        "finish": t.get("finish"),
        "tools": sum(x["kind"] == "tool" for x in turns),
        "question": _question(t.get("prompt")),
        "turns": turns,
    }


def _question(prompt: Any) -> str:
    if isinstance(prompt, list):
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    return prompt if isinstance(prompt, str) else ""


def create_app(run_dir: str | Path, api_key: str | None = None):
    """The viewer's app: ``GET /`` (the page), ``GET /api/sources``, ``GET /api/sources/{i}`` (its trajectories)."""
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    from agentkit.server.http import RequestError, install_error_handlers, require_bearer_key

    run_dir = Path(run_dir)
    sources = find_sources(run_dir)
    app = FastAPI(title=f"agentkit view: {run_dir}", version="1")
    require_bearer_key(app, api_key)
    install_error_handlers(app)
    loaded = cache(lambda i: load(sources[i]))

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        return PAGE.replace("__RUN__", json.dumps(str(run_dir)))

    @app.get("/api/sources")
    async def list_sources() -> list[dict[str, Any]]:
        return [{"id": i, "path": str(s.path.relative_to(run_dir)), "kind": s.kind} for i, s in enumerate(sources)]

    @app.get("/api/sources/{index}")
    async def trajectories(index: int) -> list[dict[str, Any]]:
        if not 0 <= index < len(sources):
            raise RequestError(404, f"no source {index}; this run has {len(sources)}", code="not_found")
        return loaded(index)

    return app


PAGE = r"""<!doctype html>
<html><head><meta charset="utf-8"><title>agentkit view</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f6f6f4; color: #222; }
header { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ddd; padding: 8px 16px; z-index: 1; }
header h1 { font-size: 16px; margin: 0 0 6px; }
label { margin-right: 14px; }
#summary { color: #555; margin-top: 4px; }
main { padding: 12px 16px; }
.traj { background: #fff; border: 1px solid #ddd; border-left: 6px solid #999; border-radius: 4px; margin: 0 0 12px;
  padding: 8px 12px; }
.traj.correct { border-left-color: #1a9850; } .traj.incorrect { border-left-color: #d73027; }
.head { font-weight: 600; margin-bottom: 4px; } .head span { font-weight: 400; color: #555; margin-left: 10px; }
.question { color: #444; white-space: pre-wrap; margin-bottom: 6px; }
.turn { margin: 6px 0; padding: 4px 8px; border-radius: 3px; }
.turn.model { background: #eef3fb; } .turn.tool { background: #f4f0e6; } .turn.tool.failed { background: #fbe3e3; }
.turn pre { margin: 2px 0; white-space: pre-wrap; word-break: break-word; font: 12px/1.35 ui-monospace, monospace; }
.badge { display: inline-block; font-size: 12px; padding: 0 6px; border-radius: 8px; background: #ddd; margin-right: 6px; }
.strip { display: flex; height: 10px; margin: 3px 0; border: 1px solid #ccc; }
.strip i { flex: 1 1 0; min-width: 1px; }
</style></head>
<body>
<header><h1>agentkit view <small id="run"></small></h1>
<label>source <select id="source"></select></label>
<label>correct <select id="correct"><option value="all">all</option><option value="yes">correct</option>
<option value="no">incorrect</option><option value="unknown">unknown</option></select></label>
<label>tool calls ≥ <input id="min_tools" type="number" min="0" value="0" style="width:4em"></label>
<label>≤ <input id="max_tools" type="number" min="0" value="" style="width:4em"></label>
<label>step <select id="step"><option value="all">all</option></select></label>
<div id="summary"></div></header>
<main id="list"></main>
<script>
const RUN = __RUN__;
const q = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
let rows = [];
function heat(e) {  // 0 nats: white, 4+: dark red
  const t = Math.max(0, Math.min(1, e / 4));
  const c = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${c(255, 178)},${c(255, 24)},${c(255, 43)})`;
}
function esc(s) { return String(s ?? "").replace(/[&<>]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c])); }
function fmt(v) { return v === null || v === undefined ? "–" : (Math.round(v * 1000) / 1000).toString(); }
function card(t) {
  const cls = t.correct === true ? "correct" : t.correct === false ? "incorrect" : "unknown";
  const turns = t.turns.map((u) => {
    if (u.kind === "model") {
      const strip = u.entropies.length ? `<div class="strip" title="token entropies">${u.entropies.map(
        (e, i) => `<i style="background:${heat(e)}" title="token ${i}: ${e} nats"></i>`).join("")}</div>` : "";
      const scored = u.reward === null || u.reward === undefined ? "" : `<span class="badge">reward ${fmt(u.reward)}</span>` +
        `<span class="badge">advantage ${fmt(u.advantage)}</span>`;
      return `<div class="turn model"><span class="badge">model</span>${scored}${strip}<pre>${esc(u.text)}</pre></div>`;
    }
    const args = u.arguments ? `<pre>${esc(JSON.stringify(u.arguments))}</pre>` : "";
    return `<div class="turn tool ${u.ok === false ? "failed" : ""}"><span class="badge">${esc(u.tool || "tool")}</span>` +
      `<span class="badge">${u.ok === false ? "failed" : "ok"}</span>${args}<pre>${esc(u.text)}</pre></div>`;
  }).join("");
  return `<div class="traj ${cls}"><div class="head">${esc(t.task_id)}<span>step ${t.step ?? "–"}</span>` +
    `<span>sample ${t.sample ?? "–"}</span><span>reward ${fmt(t.reward)}</span><span>${cls}</span>` +
    `<span>${t.tools} tool call${t.tools === 1 ? "" : "s"}</span><span>finish: ${esc(t.finish)}</span>` +
    `<span>answer: ${esc(t.answer)}</span></div><div class="question">${esc(t.question)}</div>${turns}</div>`;
}
function render() {
  const correct = $("correct").value, lo = +$("min_tools").value || 0;
  const hi = $("max_tools").value === "" ? Infinity : +$("max_tools").value, step = $("step").value;
  const shown = rows.filter((t) =>
    (correct === "all" || (correct === "yes" && t.correct === true) || (correct === "no" && t.correct === false) ||
     (correct === "unknown" && (t.correct === null || t.correct === undefined))) &&
    t.tools >= lo && t.tools <= hi && (step === "all" || String(t.step) === step));
  $("summary").textContent = `${shown.length} of ${rows.length} trajectories`;
  $("list").innerHTML = shown.slice(0, 200).map(card).join("");
  const p = new URLSearchParams({source: $("source").value, correct, min_tools: lo, step});
  if ($("max_tools").value !== "") p.set("max_tools", $("max_tools").value);
  history.replaceState(null, "", "?" + p.toString());
}
async function loadSource() {
  rows = await (await fetch(`api/sources/${$("source").value}`)).json();
  const steps = [...new Set(rows.map((t) => t.step).filter((s) => s !== null && s !== undefined))].sort((a, b) => a - b);
  $("step").innerHTML = `<option value="all">all</option>` + steps.map((s) => `<option>${s}</option>`).join("");
  if (q.has("step")) $("step").value = q.get("step");
  render();
}
async function start() {
  $("run").textContent = RUN;
  const sources = await (await fetch("api/sources")).json();
  $("source").innerHTML = sources.map((s) => `<option value="${s.id}">${esc(s.path)}</option>`).join("");
  for (const k of ["source", "correct", "min_tools", "max_tools"]) if (q.has(k)) $(k).value = q.get(k);
  if (!sources.length) { $("summary").textContent = "no trajectories in this run"; return; }
  $("source").onchange = loadSource;
  for (const k of ["correct", "min_tools", "max_tools", "step"]) $(k).oninput = render;
  await loadSource();
}
start();
</script></body></html>
"""
