"""Every bad input is one ``error:`` line and exit 2, before any model loads; runs that fail leave nothing a
resume trips on; help that answers."""

import json
import time
from dataclasses import dataclass

import pytest

from agentkit import cli
from agentkit.config import PosInt
from agentkit.recipe import Recipe
from agentkit.runner import RECIPES, run_recipe, run_status
from agentkit.testing.processes import processes
from agentkit.tools.python import PythonTool


class ModelLoaded(BaseException):
    """Raised by the guard below: the CLI got as far as loading a model (or serving) before refusing."""


@pytest.fixture
def guarded(monkeypatch, tmp_path):
    import transformers
    import uvicorn

    from agentkit.engines.config import HFConfig, VLLMConfig

    def refuse(*a, **k):
        raise ModelLoaded

    # every engine is built by its kind's config (the openai kind loads nothing: its URL check must run)
    for cls in (HFConfig, VLLMConfig):
        monkeypatch.setattr(cls, "build", refuse)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr(uvicorn, "run", refuse)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("recipe: quickstart\nnum_problems: [3\n")
    (tmp_path / "norecipe.yaml").write_text("num_problems: 3\n")
    (tmp_path / "zero.yaml").write_text("recipe: quickstart\nseed: 1\nnum_problems: 0\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 not really")
    (tmp_path / "row.jsonl").write_text('{"question": "q"}\n')
    gens = {"id": "q1", "question": "1+1?", "reference": "2", "samples": {"a": ["2", "2"]}}
    (tmp_path / "one-model.jsonl").write_text(json.dumps(gens) + "\n")
    _bad_inputs(tmp_path)
    return tmp_path


def _bad_inputs(d):
    """Files for the families of bad input that once ended in tracebacks, hangs or silent damage."""
    from agentkit.ace.deltas import Delta
    from agentkit.ace.store import PlaybookStore, log_path

    PlaybookStore.create(d / "binary.json")
    (d / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")  # the playbook replaced, its log kept
    (d / "pbdir").mkdir()
    for name, entry in {
        "strver": {"version": "2", "source": "curator", "deltas": []},
        "nodeltas": {"version": 2, "source": "curator"},
        "unknownop": {"version": 2, "source": "curator", "deltas": [{"op": "EXPLODE"}]},
        "selfroll": {"version": 2, "source": "rollback", "to": 2},
        "noto": {"version": 2, "source": "rollback"},
    }.items():
        store = PlaybookStore.create(d / f"{name}.json")
        store.commit([Delta("ADD", section="OTHERS", content="one")])
        with open(log_path(store.path), "a") as f:
            f.write(json.dumps(entry) + "\n\n")
    (d / "alias-bomb.yaml").write_text(
        "recipe: quickstart\na: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    )
    (d / "huge-int.yaml").write_text("recipe: quickstart\nnum_problems: " + "9" * 5000 + "\n")
    (d / "deep.yaml").write_text("recipe: quickstart\nkinds: " + "[" * 200 + "]" * 200 + "\n")
    run = d / "runs" / "cut"  # a run whose state records were edited by hand
    (run / "state").mkdir(parents=True)
    (run / "config.yaml").write_text("recipe: quickstart\nnum_problems: 2\n")
    (run / "state" / "predictions.jsonl").write_text(
        '{"key": "0", "value": {"correct": 1}}\n{"key": 1, "value": 3}\n{}\n'
    )
    score = d / "scored"  # a run's folder that `uncertainty score --out` must not write into
    score.mkdir()
    (score / "report.md").write_text("a recipe's report\n")
    (d / "game.py").write_text("def new_game(rng):\n    return rng.randint(0, 9)\n")


# (arguments, a part of the expected message)
BAD = [
    ("run quickstart --set sampling.temperature=-1", "sampling.temperature: must be >= 0, got -1.0"),
    ("run quickstart --set sampling.max_tokens=-5", "sampling.max_tokens: must be >= 0"),
    ("run quickstart --set sampling.max_tokens=0", "sampling.max_tokens: 0 generates nothing"),
    ("run quickstart --set sampling.top_p=0", "sampling.top_p: must be > 0"),
    ("run quickstart --set sampling.seeds=[1]", "sampling.seeds (--set sampling.seeds=[1]): set by code for each call"),
    ("uncertainty generate --models nosuch --tasks arithmetic:2 --out o.jsonl", "model spec 'nosuch': model: unknown"),
    # keys that moved name their new place
    ("run quickstart --set temperature=0.5", "temperature (--set temperature=0.5) is now sampling.temperature"),
    (
        "run tips --set rl.max_tokens_per_turn=8",
        "rl.max_tokens_per_turn (--set rl.max_tokens_per_turn=8) is now rl.agent.sampling.max_tokens",
    ),
    ("run toollight --set eval_max_turns=2", "is now eval.max_turns"),
    ("run ace --set tokens_per_turn=8", "is now agent.sampling.max_tokens"),
    # rules across fields and bounds, before anything loads
    ("run ace --set roles.retries=-3", "roles.retries: must be >= 0"),
    ("run ace --set roles.sampling.temperature=-1", "roles.sampling.temperature: must be >= 0"),
    ("run ace --set roles.sampling.max_tokens=0", "roles.sampling.max_tokens: 0 generates nothing"),
    ("run ace --set methods=[eval]", "methods: 'eval' and playbook go together"),
    (
        "run toollight --set rules.vanilla_easy_at=0.2 --set rules.vanilla_hard_at=0.9",
        "rules.vanilla_easy_at: 0.2 is below vanilla_hard_at 0.9",
    ),
    ("run toollight --set rules.hard_to_easy=[2]", "rules.hard_to_easy: expected 2 items, got 1"),
    ("run tips --set rl.agent.sampling.temperature=0", "rl.agent.sampling.temperature: 0 samples every trajectory"),
    (
        "run tips --set rl.rollout_ahead=true --set rl.agent.sampling.top_p=0.9",
        "rl.rollout_ahead: needs agent.sampling temperature 1.0",
    ),
    ("run tips --set engine.kind=openai", "engine.base_url: the openai engine needs the server's base URL"),
    ("run tips --set engine.model=smollm2-135m", "engine.model: the rollout engine runs the policy"),
    (
        "run quickstart --set engine.kind=openai --set engine.max_batch_size=3",
        "unknown config key 'engine.max_batch_size'",
    ),
    (
        "run quickstart --set engine.kind=openai --set engine.base_url=ftp://x",
        "engine.base_url: 'ftp://x' is not an http",
    ),
    ("run quickstart --set num_problems=0", "num_problems: must be > 0"),
    ("run quickstart --set batch_size=0", "batch_size: must be > 0"),
    ("run quickstart --set kinds=[mul,divide]", "kinds[1]: 'divide' is not allowed"),
    ("run quickstart --set kinds=[mul", "kinds: '[mul' is not a valid YAML list"),
    ("run quickstart --set kinds=", "kinds: must not be empty"),
    ("run quickstart --set novalue", "is not of the form key=value"),
    ("run quickstart --set a..b=1", "the key has an empty part"),
    ("run quickstart --set engine.max_batch_sise=3", "did you mean 'engine.max_batch_size'"),
    ("run quickstart --set max_batch_size=3", "did you mean 'engine.max_batch_size'"),
    ("run quickstart --set engine=3", "engine.kind: unknown engine '3'"),
    ("run quickstart --set engine.kind=tpu", "engine.kind: unknown engine 'tpu'"),
    ("run quickstart --set engine.model=smolm2-135m", "did you mean 'smollm2-135m'"),
    ("run quickstart --set num_problems=many", "num_problems: expected int"),
    ("run quickstart --set num_problems=0 --set sampling.temperature=-1 --set bogus=1", "3 config problems"),
    ("run quickstart --output-dir afile", "--output-dir afile is a file"),
    ("run quickstrat", "did you mean 'quickstart'"),
    ("run quickstart --preset nosuch", "has no preset 'nosuch'"),
    ("run bad.yaml", "malformed YAML at bad.yaml:3:1"),
    ("run missing.yaml", "missing.yaml does not exist"),
    ("run norecipe.yaml", "has no 'recipe:' key"),
    ("run zero.yaml", "num_problems: must be > 0, got 0 (zero.yaml:3)"),
    ("run quickstart --resume", "no run to resume under outputs/quickstart"),
    ("run quickstart --resume nowhere", "nowhere is not a run directory"),
    ("run toollight --set questions=none.jsonl", "questions: none.jsonl does not exist"),
    ("run toollight --set tools=[python,web]", "tools[1]: 'web' is not allowed"),
    ("run toollight --set test_fraction=1.5", "test_fraction: must be < 1"),
    ("run toollight --set sampling.agent.sampling.top_p=0", "sampling.agent.sampling.top_p: must be > 0"),
    ("run toollight --set model=nosuch", "model: unknown model 'nosuch'"),
    ("run toollight_analyze --set suites=[]", "suites: must not be empty"),
    ("run serve_demo --set concurrency=0", "concurrency: must be > 0"),
    ("run", "the following arguments are required: recipe"),
    ("serve --port 0", "argument --port: must be >= 1"),
    ("serve --port abc", "argument --port: expected an integer"),
    ("serve --engine tpu", "argument --engine: invalid choice"),
    ("serve --engine openai", "base_url: the openai engine needs the server's base URL"),
    ("serve --engine-option max_batch_size=0", "max_batch_size: must be > 0"),
    ("serve --engine-option nokey", "--engine-option 'nokey' is not of the form key=value"),
    (
        "serve --engine openai --upstream http://127.0.0.1:1/v1 --engine-option dtype=float16",
        "unknown config key 'dtype'",
    ),
    ("serve --agent tir --tools pyhton", "unknown tool 'pyhton'"),
    ("serve --agent tir --tools search", "the search tool needs a --corpus"),
    ("serve --agent tir --tools search --corpus none.jsonl", "--corpus none.jsonl does not exist"),
    ("serve --tools search", "--tools and --corpus need --agent tir"),
    ("serve --responses-store /proc/nosuch/r.db", "--responses-store /proc/nosuch/r.db"),
    ("serve --responses-ttl-days 0", "argument --responses-ttl-days: must be > 0"),
    ("tool-server search", "the search server needs --corpus"),
    ("tool-server python --cpu-s 0", "argument --cpu-s: must be > 0"),
    ("tool-server python --max-concurrency 0", "argument --max-concurrency: must be >= 1"),
    ("tool-server bash", "argument name: invalid choice"),
    ("bench engine --batch-sizes 1,0", "argument --batch-sizes: must be >= 1"),
    ("bench sandbox -n 0", "argument -n: must be >= 1"),
    ("bench agent --turns -1", "argument --turns: must be >= 1"),
    ("bench toollight-sampling --workload web", "argument --workload: invalid choice"),
    ("bench compare nosuch.json docs/results/bench", "nosuch.json does not exist"),
    ("bench compare docs/results/bench docs/results/bench --margin -1", "argument --margin: must be >= 0"),
    ("uncertainty generate --models smollm2-135m --tasks arithmetic:0 --out o.jsonl", "N must be a positive"),
    ("uncertainty generate --models smollm2-135m --tasks nosuch --out o.jsonl", "'nosuch' is neither a file"),
    ("uncertainty generate --models tiny-random,tiny-random --tasks arithmetic:2 --out o.jsonl", "names a model twice"),
    (
        "uncertainty generate --models smollm2-135m --tasks arithmetic:2 --out o.jsonl --samples 1",
        "argument --samples: must be >= 2",
    ),
    ("uncertainty generate --models smollm2-135m --tasks row.jsonl --out o.jsonl", "row.jsonl"),
    ("uncertainty score corrupt.parquet", "corrupt.parquet: not a readable Parquet file"),
    ("uncertainty score missing.jsonl", "missing.jsonl does not exist"),
    ("uncertainty score one-model.jsonl --models a", "is only the reference model"),
    ("uncertainty score one-model.jsonl", "the ensemble is only the reference model 'a'"),
    ("uncertainty score row.jsonl --similarity cosine", "argument --similarity: invalid choice"),
    ("models prepare nosuch", "unknown model 'nosuch'"),
    ("frobnicate", "invalid choice: 'frobnicate'"),
    # ace: playbooks and logs that are not what the store wrote
    ("ace show binary.json", "binary.json: not UTF-8 text"),
    ("ace history binary.json", "binary.json: not UTF-8 text"),
    ("ace verify binary.json", "binary.json: not UTF-8 text"),
    ("ace history strver.json", "strver.json.log.jsonl:3: version must be an integer, got '2'"),
    ("ace verify nodeltas.json", "needs 'deltas', a list of operations"),
    ("ace show unknownop.json", "unknown operation 'EXPLODE'"),
    ("ace history selfroll.json", "a rollback needs 'to', an earlier version (0..1), got 2"),
    ("ace verify noto.json", "a rollback needs 'to', an earlier version (0..1), got None"),
    ("ace rollback strver.json --to -1", "argument --to: must be >= 0"),
    # gamerl: sizes and counts, engines without a server
    ("gamerl export maze --size 0 --out ex", "argument --size: must be >= 1"),
    ("gamerl export maze --size -3 --out ex", "argument --size: must be >= 1"),
    ("gamerl levels sudokku", "unknown game 'sudokku'"),
    ("gamerl code2logic game.py --instances 0 --out c2l", "argument --instances: must be >= 1"),
    ("gamerl code2logic game.py --drafts -2 --out c2l", "argument --drafts: must be >= 0"),
    ("gamerl code2logic game.py --drafts 0 --out c2l", "--drafts 0 without --templates"),
    ("gamerl code2logic game.py --engine openai --out c2l", "the openai engine needs the server's base URL"),
    ("gamerl code2logic game.py --engine openai --base-url file:///etc --out c2l", "is not an http(s) URL"),
    ("gamerl code2logic nogame.py --out c2l", "nogame.py: no such file"),
    # extras: rules that involve two keys
    ("run extras.graph.difflift --set informative=64 --set channels=4", "cannot exceed channels (4)"),
    ("run extras.graph.sc --set graphs=1", "graphs: 1 leaves 0 for training"),
    ("run extras.graph.difflift --set motif_graphs=5", "motif_graphs: 5 leaves 1 for validation"),
    # YAML that is too large to build
    ("run alias-bomb.yaml", "expands to more than 100,000 values"),
    ("run huge-int.yaml", "Exceeds the limit (4300 digits)"),
    ("run deep.yaml", "nests deeper than 64 levels"),
    ("run quickstart --set kinds=" + "[" * 70 + "]" * 70, "nests deeper than 64 levels"),
    # resume: state the run did not write
    (
        "run quickstart --resume runs/cut",
        "cannot resume: runs/cut/state/predictions.jsonl:2",
    ),
    # serve: playbooks and upstreams checked before the model loads
    ("serve --agent ace --learn --playbook pbdir", "--playbook pbdir is a directory"),
    ("serve --agent ace --learn --playbook binary.json", "binary.json: not UTF-8 text"),
    ("serve --agent ace --playbook strver.json", "version must be an integer"),
    ("serve --engine openai --upstream notaurl", "'notaurl' is not an http(s) URL"),
    ("serve --engine openai --upstream file:///etc/passwd", "is not an http(s) URL"),
    ("serve --engine openai --upstream http://127.0.0.1:1/v1", "cannot reach http://127.0.0.1:1/v1"),
    ("serve --max-n 0", "argument --max-n: must be >= 1"),
    ("serve --max-body-mb 0", "argument --max-body-mb: must be > 0"),
    # outputs that would overwrite another command's files
    ("uncertainty score one-model.jsonl --models a,b --out scored", "scored already exists and holds files"),
    ("uncertainty score one-model.jsonl --out afile", "afile is a file"),
    ("uncertainty score one-model.jsonl --bootstrap -1", "argument --bootstrap: must be >= 0"),
]


@pytest.mark.parametrize("args,expected", BAD, ids=[a for a, _ in BAD])
def test_bad_input_is_one_error_line(guarded, capsys, args, expected):
    with pytest.raises(SystemExit) as e:  # argparse's errors exit; the commands' errors return 2
        raise SystemExit(cli.main(args.split(" ")))
    out, err = capsys.readouterr()
    assert e.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert expected in lines[0], lines[0]
    assert not list(guarded.glob("outputs/*/*")), "a run directory was created for a bad input"


def test_enough_bad_inputs():
    assert len(BAD) >= 90 and len({a.split()[0] for a, _ in BAD}) >= 8


def test_an_unexpected_failure_is_one_line_and_exit_1(monkeypatch, capsys):
    from agentkit.commands.run import RecipesCommand

    monkeypatch.setattr(RecipesCommand, "run", lambda self, a: 1 / 0)
    assert cli.main(["recipes", "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ZeroDivisionError" in err and "--debug" in err
    with pytest.raises(ZeroDivisionError):
        cli.main(["--debug", "recipes", "list"])


@dataclass
class FlakyCfg:
    """A recipe that starts a python sandbox and fails in train when ``fail`` is set.

    fail: raise in train. steps: how many sandbox calls train makes.
    """

    fail: bool = False
    steps: PosInt = 2


class FlakyRecipe(Recipe[FlakyCfg]):
    name = "test-flaky"
    config_cls = FlakyCfg

    def setup(self):
        self.tools = {"python": PythonTool()}

    def train(self):
        for i in range(self.config.steps):
            assert self.tools["python"](code=f"print({i})").ok
        if self.config.fail:
            raise RuntimeError("train failed on purpose")
        return {"steps": self.config.steps}


RECIPES.register("test-flaky", f"{__name__}:FlakyRecipe")


def _sandbox_processes() -> set[int]:
    return set(processes("/run/agentkit/worker.py", "_worker.py"))


def test_a_failed_run_is_marked_closes_its_tools_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = _sandbox_processes()  # other tests' sandboxes may be alive in this process
    with pytest.raises(RuntimeError, match="on purpose"):
        run_recipe("test-flaky", ["fail=true"], quiet=True)
    (failed,) = [p.relative_to(tmp_path) for p in (tmp_path / "outputs" / "test-flaky").iterdir()]
    status = json.loads((failed / "status.json").read_text())
    assert status["status"] == "failed" and "on purpose" in status["error"]
    deadline = time.monotonic() + 10  # teardown closed the sandbox: none of its workers is left
    while _sandbox_processes() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _sandbox_processes() - before
    # a plain --resume picks it and says so; a --set that changes its config is refused without --force
    with pytest.raises(Exception, match=r"would change the run's config: fail \(True -> False\).*--force"):
        run_recipe("test-flaky", ["fail=false"], resume=True, quiet=True)
    metrics, run_dir = run_recipe("test-flaky", ["fail=false"], resume=True, force=True, quiet=True)
    assert run_dir == failed and metrics == {"steps": 2} and run_status(run_dir) == "complete"
    assert f"resuming {failed} (failed)" in capsys.readouterr().err
    change = json.loads((run_dir / "config_changes.jsonl").read_text())
    assert change["changes"] == {"fail": [True, False]}
    # a complete run is never picked again
    with pytest.raises(Exception, match="every run there is complete"):
        run_recipe("test-flaky", [], resume=True, quiet=True)


def test_an_interrupt_names_the_command_that_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(FlakyRecipe, "train", interrupted)
    assert cli.main(["run", "test-flaky", "--quiet"]) == 130
    (run_dir,) = [p.relative_to(tmp_path) for p in (tmp_path / "outputs" / "test-flaky").iterdir()]
    assert run_status(run_dir) == "interrupted"
    assert f"resume with `agentkit run test-flaky --resume {run_dir}`" in capsys.readouterr().err


def test_recipe_help_lists_every_key(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "toollight", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "usage: agentkit run" in out
    assert "  sampling.agent.sampling.top_p: float in (0, 1] = 0.95" in out  # nested, with its constraint
    assert "sampling.agent.sampling.seeds" not in out  # set by code for each call
    assert "  tools: list of (python | search), not empty = ['python', 'search']" in out
    assert "  dpo.beta: float > 0 = 0.1\n      the sigmoid loss's β (paper 0.1)\n" in out  # its help
    assert "  dpo.*\n      each DPO round's settings\n" in out  # a section, with its help
    assert "  engine.kind: str = 'hf'" in out and "  engine.max_batch_size: int > 0 = 64" in out
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    assert "TCP port (default: 8000)" in capsys.readouterr().out


def test_every_shipped_preset_satisfies_its_constraints():
    from agentkit.config import build_config
    from agentkit.runner import recipe_dir, resolve_spec

    checked = 0
    for name in RECIPES.names():
        if name.startswith("test-"):
            continue
        cls = RECIPES.get(name)
        for preset in sorted(p.stem for p in recipe_dir(cls).glob("*.yaml")):
            _, cls, layer = resolve_spec(name, preset)
            build_config(cls.config_cls, layer)
            checked += 1
    assert checked >= 15


def test_output_piped_into_head_ends_quietly(tmp_path):
    """``agentkit ace show FILE | head -1``: the closed pipe is the reader's choice, not an error."""
    import subprocess
    import sys

    from agentkit.ace.playbook import Bullet, Playbook
    from agentkit.ace.store import PlaybookStore

    pb = Playbook()
    for i in range(3000):  # more than a pipe's buffer, so the write meets the closed end
        b = Bullet(pb.new_id("OTHERS"), "OTHERS", f"Strategy number {i} for the test of a closed pipe.")
        pb.bullets[b.id] = b
    PlaybookStore.create(tmp_path / "pb.json", pb)
    shell = f"{sys.executable} -m agentkit ace show {tmp_path / 'pb.json'} | head -1"
    r = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, timeout=120)
    assert r.stdout.startswith("# version 0: 3000 bullets") and r.stderr == "" and r.returncode == 0
