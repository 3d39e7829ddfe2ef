"""gqa/sim/outputs.py: a run's files staged, put in place together, or all removed."""

import pytest

from gqa.sim.outputs import Outputs, cannot_make, cannot_write


def test_a_commit_that_fails_names_the_final_path_and_the_discard_leaves_only_what_was_there(tmp_path):
    outputs = Outputs()
    outputs.file(tmp_path / "w.png").write_bytes(b"picture")
    staged = outputs.folder(tmp_path / "made" / "deeper" / "fifo")
    (staged / "report.html").write_text("page")
    assert outputs.final_name(staged / "report.html") == str(tmp_path / "made" / "deeper" / "fifo" / "report.html")
    (tmp_path / "made" / "deeper" / "fifo").write_text("a file where the folder goes")
    with pytest.raises(NotADirectoryError) as caught:
        outputs.commit()
    assert caught.value.filename == str(tmp_path / "made" / "deeper" / "fifo")
    outputs.discard()   # the picture put in place: gone; the folders made, but for what another wrote in them
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == ["made/deeper/fifo"]
    (tmp_path / "made" / "deeper" / "fifo").unlink()
    outputs = Outputs()
    (outputs.folder(tmp_path / "made" / "x" / "gqa") / "report.html").write_text("page")
    outputs.discard()
    assert [p.name for p in tmp_path.rglob("*")] == ["made", "deeper"]   # x made and removed; the rest was there


def test_the_checks_leave_nothing_behind(tmp_path):
    assert cannot_write(tmp_path, "w.png") is None and cannot_make(tmp_path / "a" / "b") is None
    assert list(tmp_path.iterdir()) == []
    assert isinstance(cannot_write(tmp_path, "w" * 300 + ".png"), OSError)
    (tmp_path / "file").write_text("")
    assert isinstance(cannot_make(tmp_path / "file" / "r"), OSError)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
