"""``agentkit view`` in a real headless browser (Chromium, from Debian's packages): a recorded run, with an RL
run's rollouts (rewards, advantages and entropies per turn) and an agent's evaluation trajectories (tool calls,
correctness); the page's filters as the browser applies them, and a screenshot whose pixels hold the heat strips
and the correctness colours."""

import re
import shutil
import subprocess

import pytest

from agentkit.agent import AgentConfig, rollout
from agentkit.agent.trajectory import save_jsonl
from agentkit.engines import SamplingParams
from agentkit.runner import run_recipe
from agentkit.testing.scripted import ScriptedEngine
from agentkit.testing.servers import serve_in_thread
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig
from agentkit.viewer import create_app, find_sources, load

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCRIPT = {
    "first": ["<python>print(6*7)</python>", "<answer>42</answer>"],  # one call, correct
    "second": ["<python>print(1)</python>", "<python>print(2)</python>", "<answer>5</answer>"],  # two calls, wrong
    "third": ["<answer>9</answer>"],  # no call, correct
}
GOLD = {"first": "42", "second": "3", "third": "9"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A TIPS run (tiny preset: its rollouts recorded step by step) with an agent's evaluation beside it."""
    _, run = run_recipe(
        "tips",
        ["seeds=[0]", "rl.agent.sampling.entropy=true"],
        output_dir=str(tmp_path_factory.mktemp("v") / "run"),
        preset="tiny",
        quiet=True,
    )
    tool = PythonTool(SandboxConfig(pool_size=1))
    try:
        trajs = rollout(
            ScriptedEngine(SCRIPT),
            [{"id": k, "question": f"{k} question"} for k in SCRIPT],
            {"python": tool},
            AgentConfig(max_turns=4, sampling=SamplingParams(max_tokens=64)),
        )
    finally:
        tool.close()
    for t in trajs:
        t.meta["correct"] = t.answer == GOLD[t.task_id]
    save_jsonl(trajs, run / "eval" / "trajectories.jsonl")
    return run


def test_sources_and_rows(run_dir):
    paths = [str(s.path.relative_to(run_dir)) for s in find_sources(run_dir)]
    assert "eval/trajectories.jsonl" in paths
    assert any(re.fullmatch(r"state/rl/(grpo|tips)-s0/rollouts\.p0\.jsonl", p) for p in paths)
    rl = load(next(s for s in find_sources(run_dir) if "tips-s0" in str(s.path)))
    assert rl and all(t["step"] is not None and t["reward"] is not None for t in rl)
    model_turns = [u for t in rl for u in t["turns"] if u["kind"] == "model"]
    assert all(u["reward"] is not None and u["advantage"] is not None and u["entropies"] for u in model_turns)
    ev = {t["task_id"]: t for t in load(next(s for s in find_sources(run_dir) if "eval" in str(s.path)))}
    assert (ev["first"]["tools"], ev["first"]["correct"]) == (1, True)
    assert (ev["second"]["tools"], ev["second"]["correct"]) == (2, False)
    tool = next(u for u in ev["first"]["turns"] if u["kind"] == "tool")
    assert tool["tool"] == "python" and tool["ok"] and "42" in tool["text"]


def _chromium(url: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        CHROMIUM,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--virtual-time-budget=15000",
        *args,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (make setup installs Debian's)")
def test_the_page_in_a_headless_browser(run_dir, tmp_path):
    sources = [str(s.path.relative_to(run_dir)) for s in find_sources(run_dir)]
    ev, rl = sources.index("eval/trajectories.jsonl"), next(i for i, p in enumerate(sources) if "tips-s0" in p)
    with serve_in_thread(create_app(run_dir)) as url:
        dom = _chromium(f"{url}/?source={ev}&correct=yes&min_tools=1", "--dump-dom").stdout
        assert dom.count('class="traj correct"') == 1 and "first" in dom and "second question" not in dom
        assert "1 of 3 trajectories" in dom and "6*7" in dom  # the call's code, as the browser rendered it
        dom = _chromium(f"{url}/?source={ev}&correct=no", "--dump-dom").stdout
        assert dom.count('class="traj incorrect"') == 1 and "2 tool calls" in dom
        shot = tmp_path / "rollouts.png"
        _chromium(f"{url}/?source={rl}", f"--screenshot={shot}", "--window-size=1200,1400")
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1200, 1400)
    pixels = list(img.getdata())
    strip = sum(1 for r, g, b in pixels if r > 190 and g < 200 and b < 200 and r - g > 40)  # entropy heat (reds)
    wrong = sum(1 for p in pixels if p == (215, 48, 39))  # the incorrect trajectories' border, #d73027
    blue = sum(1 for p in pixels if p == (238, 243, 251))  # model turns' background, #eef3fb
    assert strip > 500 and wrong > 500 and blue > 5000, (strip, wrong, blue)


def test_agentkit_view_cli_refuses_a_missing_run(tmp_path):
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "agentkit", "view", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert r.returncode == 2 and "is not a directory" in r.stderr
