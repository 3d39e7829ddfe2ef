"""A queue whose database was emptied or swapped for another application's
SQLite file: `gqa local start` refuses in one line with exit code 2 and
touches nothing in the home (the evidence someone may need to restore it)."""

import hashlib
import sqlite3

import pytest

from .harness import one_line_error

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]


def snapshot(home) -> dict[str, tuple]:
    """Every path under the home with its size, modification time and content hash."""
    seen = {}
    for path in sorted(home.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else ""
        seen[str(path.relative_to(home))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return seen


def empty(db) -> None:
    db.write_bytes(b"")


def foreign(db) -> None:
    db.unlink()
    other = sqlite3.connect(db)
    other.executescript("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT);"
                        "INSERT INTO moz_places (url) VALUES ('https://example.org/');")
    other.commit()
    other.close()


@pytest.mark.parametrize("spoil", [empty, foreign], ids=["empty", "foreign"])
def test_start_refuses_a_spoiled_database_and_changes_nothing(chaos, spoil):
    chaos.start()
    ids = chaos.submit(2, 0.1)
    chaos.check(f"queue before its db is {spoil.__name__}", ids)
    assert chaos.stop()

    spoil(chaos.home / "gqa.db")
    before = snapshot(chaos.home)
    proc = chaos.cli("local", "start", "--gpus", "4", "--detach")
    assert proc.returncode == 2 and one_line_error(proc), (proc.returncode, proc.stderr)
    assert snapshot(chaos.home) == before
    proc = chaos.cli("queue")
    assert one_line_error(proc), proc.stderr
    assert snapshot(chaos.home) == before
