"""`gqa report --out DIR` when a file of it cannot be written: the error names
that file, and nothing the run wrote is left beside what was there before."""

import errno
from pathlib import Path

import pytest

import gqa.reporting.files as files

FIGURES = ("waits", "pools")


@pytest.fixture(autouse=True)
def quick_figures(monkeypatch):
    """Two small figures: what is written matters here, not how they are drawn."""
    monkeypatch.setattr(files, "render_figures", lambda report: {name: b"\x89PNG " + name.encode()
                                                                 for name in FIGURES})


def listing(directory: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(directory)): None if p.is_dir() else p.read_bytes() for p in directory.rglob("*")}


def test_a_page_in_the_way_is_named_and_nothing_is_left(cli, tmp_path):
    out = tmp_path / "rdir2"
    (out / "report.html").mkdir(parents=True)
    (out / "waits.png").write_bytes(b"last week's")
    before = listing(out)
    code, stdout, err = cli("report", "--out", str(out))
    assert (code, stdout, err) == (2, "", f"gqa: error: {out / 'report.html'}: Is a directory\n")
    assert listing(out) == before


def test_a_failed_write_removes_the_directories_it_made(cli, tmp_path, monkeypatch):
    real = Path.write_bytes

    def disk_full(path, data):
        if path.name == ".report.html.partial":
            real(path, data[:10])
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(Path, "write_bytes", disk_full)
    code, _, err = cli("report", "--out", str(tmp_path / "new" / "report"))
    assert (code, err) == (2, f"gqa: error: {tmp_path / 'new' / 'report' / 'report.html'}: "
                              "No space left on device\n")
    assert not (tmp_path / "new").exists()


def test_a_report_written_whole_replaces_the_last(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "waits.png").write_bytes(b"last week's")
    code, _, err = cli("report", "--out", str(out))
    assert code == 0, err
    assert sorted(listing(out)) == ["pools.png", "report.html", "waits.png"]
    assert (out / "waits.png").read_bytes() == b"\x89PNG waits"
