"""`agentkit gamerl export`: the text and image variants saved as HF datasets that load back and score."""

import datasets

from agentkit.cli import main
from agentkit.gamerl import score_answer
from agentkit.gamerl.dataset import IMAGE_BOARD, from_hf_row


def test_export_text_and_image_variants(tmp_path, capsys):
    for board in ("text", "image"):
        out = tmp_path / board
        assert main(["gamerl", "export", "maze,tetris", "--size", "6", "--board", board, "--out", str(out)]) == 0
        ds = datasets.load_from_disk(str(out))
        assert len(ds) == 6 and set(ds["game"]) <= {"maze", "tetris"} and set(ds["board"]) == {board}
        assert ("image" in ds.column_names) == (board == "image")
        assert all((IMAGE_BOARD in q) == (board == "image") for q in ds["question"])
        row = ds[0]
        assert score_answer(f"<answer>{row['answer']}</answer>", from_hf_row(row)) == 1.0
    assert "6 rows" in capsys.readouterr().out


def test_levels_table_and_file(tmp_path, capsys):
    """`gamerl levels`: a harder level draws a larger board where the generator scales one, and the file holds the
    figures the table prints."""
    import json

    out = tmp_path / "levels.json"
    assert main(["gamerl", "levels", "sudoku,tictactoe", "--per-level", "4", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    sizes = json.loads(out.read_text())["games"]
    sudoku = [sizes["sudoku"][lv]["board_chars"] for lv in ("Easy", "Medium", "Hard")]
    assert sudoku[0] < sudoku[1] < sudoku[2]
    assert len({sizes["tictactoe"][lv]["board_chars"] for lv in sizes["tictactoe"]}) == 1  # a 3×3 board at every level
    assert f"| sudoku | {sudoku[0]:.0f} / {sudoku[1]:.0f} / {sudoku[2]:.0f} |" in table
