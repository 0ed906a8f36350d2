"""Greedy evaluation rows and their summaries, with a scripted engine answering each question one way."""

from agentkit.gamerl import create_dataset
from agentkit.gamerl.evaluate import accuracy, chance, evaluate
from agentkit.testing.scripted import ScriptedEngine


def test_rows_scores_and_summaries():
    entries = list(create_dataset("tictactoe", size=4, seed=0, tasks=["turn", "outcome"], format="choice"))
    entries += list(create_dataset("blocks3d", size=2, seed=0, tasks=["cubes"], format="fill"))
    replies = {}
    for i, e in enumerate(entries):  # right, unreadable, wrong, right-with-stop, right, wrong
        gold = e["answer"]
        replies[e["question"]] = [
            [f"<answer>{gold}</answer>"],
            ["I cannot tell."],
            ["<answer>Z</answer>" if e["metadata"]["options"] else "<answer>999</answer>"],
            [f"So the answer is {gold}. Done"],
            [f"<answer>{gold}</answer> trailing text after the stop"],
            ["<answer>-1</answer>"],
        ][i]
    rows = evaluate(ScriptedEngine(replies), entries, max_tokens=32, batch_size=4)
    assert [r["score"] for r in rows] == [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    assert [r["path"] for r in rows][:2] == ["rule", "none"]
    assert rows[4]["output"].endswith("</answer>")  # generation stopped at the answer's end
    by_game = accuracy(rows, "game")
    assert by_game[("tictactoe",)] == (0.5, 4) and by_game[("blocks3d",)] == (0.5, 2)
    n_opts = [len(e["metadata"]["options"]) for e in entries[:4]]
    assert abs(chance(entries) - sum(1 / n for n in n_opts) / 6) < 1e-12
