"""Training rows and the curriculum's redraw: every copy of a question in a batch gets the same redrawn question,
at its game's current level; the next step draws a new one; the reward reads the row's entry."""

import json
from types import SimpleNamespace

from agentkit.agent.loop import AgentConfig
from agentkit.agent.trajectory import Segment, Trajectory
from agentkit.gamerl import Curriculum, CurriculumConfig
from agentkit.gamerl.dataset import GameConfig
from agentkit.gamerl.reward import GameReward
from agentkit.gamerl.trainer import GameGRPOTrainer, game_rows

AGENT = AgentConfig(max_turns=1, system_prompt="Answer.")
CONFIGS = {g: GameConfig(level="Easy", format="choice") for g in ("tictactoe", "blocks3d")}


def test_rows_carry_a_chat_golds_and_the_entry():
    rows = game_rows(["tictactoe", "blocks3d"], 3, seed=0, configs=CONFIGS, agent=AGENT)
    assert len(rows) == 6 and set(rows["game"]) == {"tictactoe", "blocks3d"}
    r = rows[0]
    entry = json.loads(r["entry"])
    assert r["prompt"][0] == {"role": "system", "content": "Answer."}
    assert r["prompt"][-1]["content"] == entry["question"] and r["answers"] == [entry["answer"]]


def test_redraw_is_shared_by_a_questions_copies_and_follows_the_level():
    rows = game_rows(["tictactoe", "blocks3d"], 2, seed=0, configs=CONFIGS, agent=AGENT)
    cur = Curriculum(["tictactoe", "blocks3d"], CurriculumConfig(window=1))
    fake = SimpleNamespace(
        curriculum=cur, game_configs=CONFIGS, question_seed=3, agent_config=AGENT, state=SimpleNamespace(global_step=0)
    )
    redraw = lambda row: GameGRPOTrainer._redraw(fake, row)  # noqa: E731
    a, b = redraw(rows[0]), redraw(rows[0])
    assert a == b and a["entry"] != rows[0]["entry"]
    cur.record(rows[0]["game"], 1.0)  # one success with window 1: up a level
    fake.state.global_step = 1
    c = redraw(rows[0])
    assert json.loads(c["entry"])["metadata"]["qa_level"] == "Medium" and c["entry"] != a["entry"]
    assert (
        json.loads(redraw(rows[1] if rows[1]["game"] != rows[0]["game"] else rows[2])["entry"])["metadata"]["qa_level"]
        == "Easy"
    )


def test_game_reward_verifies_the_trajectory_text():
    rows = game_rows(["blocks3d"], 1, seed=0, configs=CONFIGS, agent=AGENT)
    row = rows[0]
    gold = row["answers"][0]
    reward = GameReward(format_score=0.25)
    right = Trajectory("q", [], [], [Segment("model", f"I count. <answer>{gold}</answer>", [])], answer=gold)
    bare = Trajectory("q", [], [], [Segment("model", f"I count.\n{gold}", [])])
    wrong = Trajectory("q", [], [], [Segment("model", "<answer>Z</answer>", [])], answer="Z")
    assert reward.score_row(right, row) == {"score": 1.25, "format": 0.25, "em": 1.0, "f1": 1.0}
    assert reward.score_row(bare, row)["score"] == 1.0  # read from the last line, no format credit
    assert reward.score_row(wrong, row)["score"] == 0.25
    assert reward.paths == {"rule": 2, "none": 1}
