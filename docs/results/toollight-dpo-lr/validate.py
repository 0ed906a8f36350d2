"""Tool-Light DPO learning rate, chosen on validation questions: the first round's pairs trained into the SFT model
at each rate, then the greedy agent on questions that are in no training set and not in the test.

Run from the repository root (one thread; about 35 minutes per rate on one core of this machine):

    OMP_NUM_THREADS=1 .venv/bin/python docs/results/toollight-dpo-lr/validate.py ["SETTING NAME" ...]

Why: with LoRA r = 8, 3 epochs and the first round's 33 pre-aligned pairs, the paper's lr 7e-6 leaves the greedy
policy where SFT left it (``../toollight-lora-lr7e-6``: identical held-out answers), and 2e-4 (the rate whose
margin on the training pairs matched full fine-tuning at 7e-6, ``pilot.py``) turned the agent into one that
answers at once with no tool call (``../toollight-lora-lr2e-4``: 0/32 on both suites). The rate between them is
chosen here with no test question: validation questions come from the seeded suites under their own seed
(``VAL_SEED``), minus every test, SFT and pool question. The SFT model's own validation score is the first row.

Rule, fixed before the runs: the rate with the highest validation accuracy (both suites pooled); a tie goes to the
larger rate (it moves the policy more, which the method is for). The grid first had 2e-5 where 1e-4 is now: once
5e-5 had left the validation score where SFT had it, a smaller rate could tell nothing, so the grid went up.

Writes ``validation.jsonl``: per setting the validation summary (accuracy, tool calls, Efficiency, tokens, answered
per suite), the last epoch's reward margin, and the per-question rows. Resumes per setting.
"""

import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agentkit.data.multihop import MultiHopKB
from agentkit.data.tasks import split_held_out
from agentkit.recipes.toollight.config import ToolLightConfig
from agentkit.recipes.toollight.recipe import suite_groups
from agentkit.toollight.dpo import DPOSettings, load_pairs, train_dpo
from agentkit.toollight.rounds import Group, evaluate, summarise
from agentkit.tools import build_tools

HERE = Path(__file__).parent
RUN = HERE.parent / "toollight-lora-lr7e-6"  # its SFT model and first-round pairs (those of the lr 2e-4 run too)
VAL_SEED = 300
SETTINGS = {  # name: DPO settings (None: the SFT model, no DPO)
    "SFT (no DPO)": None,
    "LoRA r=8, lr 5e-5": dict(lora_r=8, learning_rate=5e-5),
    "LoRA r=8, lr 1e-4": dict(lora_r=8, learning_rate=1e-4),
    "LoRA r=8, lr 2e-4": dict(lora_r=8, learning_rate=2e-4),
}


def questions(c: ToolLightConfig):
    """The validation groups and the tools (the recipe's seeded suites, with VAL_SEED)."""
    kb = MultiHopKB.build(c.kb_seed)
    tools = build_tools(["python", "search"], kb.corpus(), top_k=c.search_top_k)

    used = [
        t
        for n, seed in (
            ((c.test_arithmetic, 0, c.test_multihop), c.test_seed),
            ((c.train_arithmetic, c.train_easy, c.train_multihop), c.train_seed),
            ((c.pool_arithmetic, c.pool_easy, c.pool_multihop), c.pool_seed),
        )
        for g in suite_groups(kb, tools, *n, seed)
        for t in g.tasks
    ]
    val = suite_groups(kb, tools, c.test_arithmetic, 0, c.test_multihop, VAL_SEED)
    return [Group(g.name, split_held_out(g.tasks, used)[0], g.tools) for g in val], tools


def main() -> None:
    out = HERE / "validation.jsonl"
    done = {json.loads(line)["setting"] for line in out.open()} if out.exists() else set()
    c = ToolLightConfig()
    groups, tools = questions(c)
    tok = AutoTokenizer.from_pretrained(RUN / "models/sft")
    pairs = load_pairs(RUN / "rounds/dpo-1/pairs", tok)
    only = sys.argv[1:]  # setting names to run (default: all)
    for name, kw in SETTINGS.items():
        if name in done or (only and name not in only):
            continue
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(RUN / "models/sft", dtype=torch.float32)
        row = {"setting": name, **(kw or {}), "validation_questions": {g.name: len(g.tasks) for g in groups}}
        if kw is not None:
            settings = DPOSettings(epochs=3.0, **kw)
            with tempfile.TemporaryDirectory() as d:
                hist, model = train_dpo(model, tok, pairs, settings, d, progress=False)
            steps = [h for h in hist if "rewards/margins" in h]
            last = [h for h in steps if h["epoch"] > 2.0 + 1e-9]
            row |= {
                "epochs": 3.0,
                "pairs": len(pairs),
                "steps": len(steps),
                "last_epoch_margin": statistics.mean(h["rewards/margins"] for h in last),
                "last_epoch_loss": statistics.mean(h["loss"] for h in last),
            }
        model.eval()
        engine = c.engine.build(model, tokenizer=tok, name="policy")
        rows = evaluate(engine, groups, c.eval)
        row |= {"validation": summarise(rows, "val"), "answers": rows}
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(name, {k: round(v, 3) for k, v in row["validation"].items()}, file=sys.stderr, flush=True)
    tools["python"].close()


if __name__ == "__main__":
    main()
