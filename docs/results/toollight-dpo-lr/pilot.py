"""Tool-Light DPO learning-rate pilot: how far one DPO round moves the SFT policy, full fine-tuning against LoRA r=8.

Run from the repository root (one thread; about 25 minutes per setting on a shared core):

    OMP_NUM_THREADS=1 .venv/bin/python docs/results/toollight-dpo-lr/pilot.py

It trains the first round's 33 pre-aligned pairs (docs/results/toollight-lora-lr7e-6/rounds/dpo-1/pairs) into that
run's SFT model (models/sft) with each setting below, 3 epochs (the paper's), β = 0.1, batch 4, and writes
metrics.jsonl: per setting, the log history and the last epoch's mean reward margin and accuracy (TRL's
rewards/margins = β·[(log π − log π_ref)(chosen) − (…)(rejected)]), i.e. how much the round moved the policy on its
own training pairs. No held-out question is used to choose the rate.
"""

import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agentkit.toollight.dpo import DPOSettings, load_pairs, train_dpo

HERE = Path(__file__).parent
RUN = HERE.parent / "toollight-lora-lr7e-6"
SETTINGS = {
    "full fine-tuning, lr 7e-6": dict(lora_r=0, learning_rate=7e-6),
    "LoRA r=8, lr 2e-4": dict(lora_r=8, learning_rate=2e-4),
}


def main() -> None:
    out = HERE / "metrics.jsonl"
    done = {json.loads(line)["setting"] for line in out.open()} if out.exists() else set()
    tok = AutoTokenizer.from_pretrained(RUN / "models/sft")
    pairs = load_pairs(RUN / "rounds/dpo-1/pairs", tok)
    for name, kw in SETTINGS.items():
        if name in done:
            continue
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(RUN / "models/sft", dtype=torch.float32)
        settings = DPOSettings(epochs=3.0, **kw)
        with tempfile.TemporaryDirectory() as d:
            hist, _ = train_dpo(model, tok, pairs, settings, d, progress=False)
        steps = [h for h in hist if "rewards/margins" in h]
        last = [h for h in steps if h["epoch"] > 2.0 + 1e-9]
        row = {
            "setting": name,
            **kw,
            "epochs": 3.0,
            "pairs": len(pairs),
            "steps": len(steps),
            "last_epoch_margin": statistics.mean(h["rewards/margins"] for h in last),
            "last_epoch_accuracy": statistics.mean(h["rewards/accuracies"] for h in last),
            "last_epoch_loss": statistics.mean(h["loss"] for h in last),
            "history": steps,
        }
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            name, {k: row[k] for k in ("last_epoch_margin", "last_epoch_accuracy", "last_epoch_loss")}, file=sys.stderr
        )


if __name__ == "__main__":
    main()
