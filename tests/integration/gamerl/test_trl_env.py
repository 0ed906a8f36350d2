"""Game-RL's games as TRL ``environment_factory`` environments: the moves are tools (each with the JSON schema TRL
renders into the prompt), one environment per rollout reset from its row, and the rule verifier as the reward;
one step of TRL's own ``GRPOTrainer`` runs with it."""

import json

import pytest

from agentkit.gamerl.dataset import create_dataset
from agentkit.gamerl.env import GameEnv

trl = pytest.importorskip("trl")


def test_the_moves_play_by_the_games_rules_and_the_verifier_scores_the_answer():
    entry = next(e for e in create_dataset("maze", size=8, seed=3) if e["metadata"]["task"] != "")
    env = GameEnv()
    assert "answer(answer)" in env.reset(entry=json.dumps(entry))  # a training row's entry column (JSON text)
    start = env.board()
    moves = env.legal_moves().splitlines()
    assert moves and all(json.loads(m) in ("U", "D", "L", "R") for m in moves)
    after = env.play(moves[0])
    assert after != start and env.plays == 1
    assert env.play('"nowhere"').startswith("Error: '\"nowhere\"' is not a legal move")
    assert env.undo() == start
    assert env.get_reward() == 0.0  # nothing submitted
    env.answer("certainly not the answer")
    assert env.get_reward() == 0.0
    env.answer(entry["answer"])
    assert env.get_reward() == 1.0
    fresh = GameEnv()
    fresh.reset(entry=entry)
    assert fresh.board() == start and fresh.submitted is None  # one environment per rollout, nothing shared


def test_one_grpo_step_with_the_environment(tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentkit.engines.hf import HFEngine

    eng = HFEngine("tiny-random")
    tok = eng.tokenizer
    tok.chat_template = qwen2_5_chat_template  # a template TRL parses tool calls from (hermes)
    tok.padding_side = "left"
    entries = create_dataset("maze", size=4, seed=0)
    rows = [{"prompt": [{"role": "user", "content": e["question"]}], "entry": json.dumps(e)} for e in entries]
    resets: list[str] = []

    class Maze(GameEnv):
        def reset(self, **row):
            resets.append(row["entry"])
            return super().reset(**row)

    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=16,
        max_tool_calling_iterations=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=eng.model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        environment_factory=Maze,
    )
    names = {t.__name__ for t in trainer.tools}
    assert names == {"legal_moves", "play", "undo", "board", "answer"}
    rendered = tok.apply_chat_template(rows[0]["prompt"], tools=trainer.tools, tokenize=False)
    assert '"name": "play"' in rendered and "One of the legal moves" in rendered  # the schema from the docstring
    trainer.train()
    assert len(resets) >= 4 and set(resets) <= {r["entry"] for r in rows}  # one reset per rollout, from its row
    logged = [h for h in trainer.state.log_history if "rewards/Maze/mean" in h]
    assert logged and logged[0]["rewards/Maze/mean"] == 0.0  # a random model submits no answer
