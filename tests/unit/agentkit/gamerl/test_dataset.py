"""The dataset API (reasoning-gym's shapes), GameQA's schema, composites, HF export, the reasoning-gym adapter
and the curriculum."""

import pytest

from agentkit.errors import AgentkitError
from agentkit.gamerl import Curriculum, CurriculumConfig, create_dataset, score_answer, to_hf, verify
from agentkit.gamerl.dataset import from_hf_row

GAMEQA_FIELDS = {
    "data_id", "qa_type", "question_id", "question_description", "state", "plot_level", "qa_level", "options",
    "analysis",
}  # fmt: skip


def test_reasoning_gym_shapes_and_gameqa_schema():
    ds = create_dataset("tictactoe", size=5, seed=0, level="Medium", tasks=["outcome", "turn"], format="choice")
    assert len(ds) == 5 and len(list(ds)) == 5
    e = ds[2]
    assert set(e) == {"question", "answer", "metadata"}
    assert GAMEQA_FIELDS <= set(e["metadata"])
    assert e["metadata"]["source_dataset"] == "tictactoe" and e["metadata"]["source_index"] == 2
    assert e["metadata"]["qa_type"] in ("StatePerception", "StatePrediction", "StrategyOptimization")
    assert "<answer></answer>" in e["question"] and "Options:" in e["question"]
    assert ds.score_answer(e["answer"], e) == 1.0
    with pytest.raises(IndexError):
        ds[5]


def test_choice_format_turns_fill_tasks_into_multiple_choice():
    ds = create_dataset("life", size=20, seed=0, tasks=["alive_after"], format="choice", n_options=5)
    for e in ds:
        m = e["metadata"]
        assert m["verify"]["kind"] == "choice" and len(m["options"]) == 5 and e["answer"] in "ABCDE"
        gold_text = m["options"]["ABCDE".index(e["answer"])]
        assert score_answer(gold_text, e) == 1.0  # the option's text is as good as its letter


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(name="mazes"), "unknown game dataset 'mazes'"),
        (dict(name="maze", level="Expert"), "level: 'Expert'"),
        (dict(name="maze", format="essay"), "format: 'essay'"),
        (dict(name="maze", tasks=["shortest_lenght"]), "maze has no task 'shortest_lenght'"),
        (dict(name="maze", levle="Easy"), "unknown option 'levle'"),
        (dict(name="maze", n_options=12), "n_options: 12"),
        (dict(name="maze", board="svg"), "board: 'svg'"),
    ],
)
def test_bad_configs_are_rejected_with_the_field(kwargs, message):
    with pytest.raises(AgentkitError, match=message):
        create_dataset(size=3, seed=0, **kwargs)


def test_composite_mixes_by_weight_and_scores_by_part():
    ds = create_dataset("composite", size=200, seed=3, datasets={"maze": 3, "blocks3d": 1})
    sources = [e["metadata"]["source_dataset"] for e in ds]
    assert set(sources) == {"maze", "blocks3d"} and 0.6 < sources.count("maze") / 200 < 0.9
    e = ds[7]
    assert ds.score_answer(f"<answer>{e['answer']}</answer>", e) == 1.0
    assert ds[7] == e


def test_hf_export_text_and_image_variants_round_trip():
    entries = list(create_dataset("composite", size=6, seed=0, datasets={"sokoban": 1, "tetris": 1}))
    text = to_hf(entries)
    assert "image" not in text.column_names and len(text) == 6
    images = to_hf(entries, images=True)
    img = images[0]["image"]
    assert img.width > 50  # decoded as a PIL image
    for row, e in zip(text, entries):
        back = from_hf_row(row)
        assert back["metadata"]["state"] == e["metadata"]["state"]
        assert score_answer(f"<answer>{row['answer']}</answer>", back) == 1.0


def test_image_boards_show_the_board_only_in_the_picture():
    """board=image: the same draw as the text variant, the board written out nowhere, its picture the game's own
    drawing of the state; the chat puts the picture before the question; the export keeps the board kind."""
    from agentkit.gamerl.dataset import IMAGE_BOARD, entry_image
    from agentkit.gamerl.evaluate import chat
    from agentkit.gamerl.games import get_game
    from agentkit.gamerl.render import png_bytes

    text, image = (create_dataset("sokoban", size=3, seed=2, board=b) for b in ("text", "image"))
    for t, i in zip(text, image):
        board = get_game("sokoban").text(t["metadata"]["state"])
        assert board in t["question"] and board not in i["question"] and IMAGE_BOARD in i["question"]
        assert t["answer"] == i["answer"] and t["metadata"]["state"] == i["metadata"]["state"]
        assert entry_image(t) is None
        assert png_bytes(entry_image(i)) == png_bytes(get_game("sokoban").draw(i["metadata"]["state"]))
        user = chat(i)[1]["content"]
        assert user[0]["type"] == "image" and user[1] == {"type": "text", "text": i["question"]}
        assert chat(t)[1]["content"] == t["question"]
    row = to_hf(list(image), images=True)[0]
    assert row["board"] == "image" and from_hf_row(row)["metadata"]["board"] == "image"


def test_a_reasoning_gym_task_through_our_verifier_path():
    ds = create_dataset("rg:mini_sudoku", size=3, seed=1)
    e = ds[0]
    good = verify(f"Filling the grid row by row.\n<answer>{e['answer']}</answer>", e)
    assert (good.score, good.path, good.source) == (1.0, "rule", "answer_tag")
    assert verify("<answer>1 2 3 4</answer>", e).score == 0.0
    assert ds.score_answer(f"\\boxed{{{e['answer']}}}", e) == 1.0
    mixed = create_dataset("composite", size=20, seed=0, datasets={"maze": 1, "rg:basic_arithmetic": 1})
    assert {x["metadata"]["source_dataset"] for x in mixed} == {"maze", "rg:basic_arithmetic"}
    assert all(mixed.score_answer(f"<answer>{x['answer']}</answer>", x) == 1.0 for x in mixed)
    with pytest.raises(AgentkitError, match="unknown reasoning-gym dataset 'mini_sudokuu'"):
        create_dataset("rg:mini_sudokuu", size=1, seed=0)


def test_curriculum_rises_with_success_falls_with_failure_and_resumes():
    cur = Curriculum(["maze", "life"], CurriculumConfig(window=4, up=0.75, down=0.25))
    for s in (1, 1, 1, 0):
        cur.record("maze", s)
    assert cur.level("maze") == "Medium" and cur.level("life") == "Easy"
    for s in (1, 1, 0):
        assert cur.record("maze", s) is None  # the window restarted at the new level
    state = cur.state_dict()
    resumed = Curriculum(["maze", "life"], CurriculumConfig(window=4, up=0.75, down=0.25))
    resumed.load_state_dict(state)
    for c in (cur, resumed):
        assert c.record("maze", 0) is None  # 3 of 4: still Medium
    for s in (0, 0, 0, 0):
        resumed.record("maze", s)
    assert resumed.level("maze") == "Easy"
    assert resumed.changes == [("maze", "Easy", "Medium"), ("maze", "Medium", "Easy")]
    capped = Curriculum(["maze"], CurriculumConfig(window=1, max_level="Medium"))
    for _ in range(5):
        capped.record("maze", 1)
    assert capped.level("maze") == "Medium"
    assert CurriculumConfig(up=0.3, down=0.5).problems()
