"""``agentkit ace``: show, history, rollback and verify on a real playbook file; bad files are one error line."""

from agentkit import cli
from agentkit.ace.deltas import Delta
from agentkit.ace.store import PlaybookStore


def test_show_history_rollback_verify(tmp_path, capsys):
    path = tmp_path / "pb.json"
    store = PlaybookStore.create(path)
    store.commit([Delta("ADD", section="OTHERS", content="Answer with the number only.")])
    store.commit([Delta("UPDATE", id="misc-00001", content="Answer with digits only.")])
    assert cli.main(["ace", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "# version 2: 1 bullets" in out and "[misc-00001] helpful=0 harmful=0 :: Answer with digits only." in out
    assert cli.main(["ace", "show", str(path), "--version", "1", "--format", "json"]) == 0
    assert '"content": "Answer with the number only."' in capsys.readouterr().out
    assert cli.main(["ace", "history", str(path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 4 and rows[2].split()[-2:] == ["ADD", "1"] and rows[3].split()[-2:] == ["UPDATE", "1"]
    assert cli.main(["ace", "rollback", str(path), "--to", "1"]) == 0
    assert "version 3 is version 1 again (1 bullets)" in capsys.readouterr().out
    assert "number only" in PlaybookStore(path).playbook.to_text()
    assert cli.main(["ace", "verify", str(path)]) == 0
    assert "4 log entries replay to the file byte for byte" in capsys.readouterr().out


def test_errors_are_one_line(tmp_path, capsys):
    assert cli.main(["ace", "show", str(tmp_path / "missing.json")]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("missing.json does not exist (create it with `agentkit run ace` or PlaybookStore.create)")
    )
    path = tmp_path / "pb.json"
    PlaybookStore.create(path)
    assert cli.main(["ace", "rollback", str(path), "--to", "5"]) == 2
    assert "no version 5 (versions 0..0)" in capsys.readouterr().err


def test_serve_ace_options_are_checked_before_the_model_loads(tmp_path, capsys):
    for argv, words in [
        (["serve", "--agent", "ace"], "--agent ace needs --playbook FILE"),
        (["serve", "--playbook", str(tmp_path / "p.json")], "--playbook, --learn and --top-k need --agent ace"),
        (["serve", "--agent", "ace", "--playbook", str(tmp_path / "none.json")], "none.json does not exist"),
        (
            ["serve", "--agent", "ace", "--playbook", "p.json", "--tools", "search"],
            "--tools and --corpus need --agent tir",
        ),
    ]:
        assert cli.main(argv) == 2, argv
        assert words in capsys.readouterr().err
