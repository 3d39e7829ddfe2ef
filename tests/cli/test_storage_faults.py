"""Storage faults at the command line: `gqa submit`, `gqa queue` and `gqa local
start` run as the user runs them (the `gqa` executable, GQA_HOME set) on a
queue whose storage is faulty; each ends with exactly one `gqa: error:` line,
a non-zero exit code (2 where the user must fix something, 1 where a retry
may do), and no traceback. Disk full and read-only use a real tmpfs and a
read-only bind mount as root; read-only falls back to modes otherwise."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gqa.adapters.local.lock import daemon_running
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.store import SqliteStore
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu
from tests.builders import job_record

ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parents[2]
GQA = Path(sys.executable).parent / "gqa"
COMMANDS = {
    "submit": ["submit", "--", "true"],
    "queue": ["queue"],
    "start": ["local", "start", "--gpus", "1", "--detach"],
}


def run_gqa(home: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    argv = [str(GQA)] if GQA.exists() else [sys.executable, "-c", "from cli.client import run; run()"]
    here = next(d for d in home.parents if d.is_dir())
    environment = dict(os.environ, GQA_HOME=str(home), GQA_CONFIG=str(here / "no-config"), **(env or {}))
    environment["PYTHONPATH"] = str(REPO)
    return subprocess.run(argv + args, env=environment, cwd=str(here), capture_output=True, text=True, timeout=60)


def a_queue(home: Path) -> Path:
    """A queue with GPUs and one job, closed cleanly (as between commands)."""
    home.mkdir(parents=True, exist_ok=True)
    StatePaths(home).ensure()
    store = SqliteStore(home / "gqa.db")
    store.set_inventory(Inventory(gpus=(Gpu(0, "virtual"),), cpus=1, memory=None))
    store.create([job_record(id="", group="")])
    store.close()
    return home / "gqa.db"


class Faults:
    """Each fault: set it up under tmp_path, return (GQA_HOME, extra environment)."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.undo: list = []

    def empty_database(self):
        db = a_queue(self.tmp / "home")
        db.write_bytes(b"")
        return db.parent, {}

    def foreign_database(self):
        home = self.tmp / "home"
        home.mkdir()
        db = sqlite3.connect(home / "gqa.db")
        db.execute("CREATE TABLE notes (text TEXT)")
        db.commit()
        db.close()
        return home, {}

    def leftovers_of_a_lost_queue(self):
        db = a_queue(self.tmp / "home")
        (db.parent / "logs" / "1.log").write_text("the old job 1")
        for name in ("gqa.db", "gqa.db-wal", "gqa.db-shm", "queue-id"):
            (db.parent / name).unlink(missing_ok=True)
        return db.parent, {}

    def home_under_a_file(self):
        (self.tmp / "file").write_text("")
        return self.tmp / "file" / "home", {}

    def read_only(self):
        db = a_queue(self.tmp / "home")
        home = db.parent
        if ROOT:
            self._mount(f"mount --bind {home} {home} && mount -o remount,bind,ro {home}", home)
        else:
            for f in home.iterdir():
                f.chmod(0o500 if f.is_dir() else 0o400)
            home.chmod(0o500)
            self.undo.append(lambda: [p.chmod(0o700) for p in [home, *home.iterdir()]])
        return home, {}

    def disk_full(self):
        if not ROOT:
            pytest.skip("a real full disk needs root to mount a tmpfs; tests/contract/test_sqlite_faults.py "
                        "covers SQLITE_FULL without it")
        home = self.tmp / "home"
        home.mkdir()
        self._mount(f"mount -t tmpfs -o size=3m tmpfs {home}", home)
        a_queue(home)
        fd = os.open(home / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        return home, {}

    def locked(self):
        db = a_queue(self.tmp / "home")
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        self.undo.append(holder.close)
        return db.parent, {"GQA_LOCK_TIMEOUT": "1"}

    def _mount(self, command: str, where: Path) -> None:
        if subprocess.run(command, shell=True, capture_output=True).returncode:
            pytest.skip(f"cannot mount here: {command}")
        self.undo.append(lambda: subprocess.run(["umount", "-l", str(where)], check=True))


@pytest.fixture
def faults(tmp_path):
    made = Faults(tmp_path)
    yield made
    for home in (tmp_path / "home",):   # a daemon started by mistake: stop it before its home goes
        pid = daemon_running(StatePaths(home)) if home.is_dir() else None
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
    for undo in reversed(made.undo):
        undo()


# fault -> (command -> (exit code, words of the one error line)); code 0: the command works despite it
EXPECTED = {
    "empty_database": {c: (2, "gqa.db is empty but this home's queue (id ") for c in COMMANDS},
    "foreign_database": {c: (2, "is an SQLite database but not a gqa queue") for c in COMMANDS},
    "leftovers_of_a_lost_queue": {c: (2, "hold files of earlier jobs: a new queue would reuse their job ids")
                                  for c in COMMANDS},
    "home_under_a_file": {c: (2, "is a file, not a directory") for c in COMMANDS},
    "read_only": {c: (2, "is read-only" if ROOT else "may not write") for c in COMMANDS},
    "disk_full": {c: (2, "is full; free space and retry") for c in COMMANDS},
    # readers never wait for a writer (WAL); writers give up after GQA_LOCK_TIMEOUT, and may retry
    "locked": {"submit": (1, "is locked by another process for more than 1 s; retry, or check `gqa local status`"),
               "queue": (0, ""),
               "start": (1, "is locked by another process for more than 1 s")},
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_a_storage_fault_is_one_error_line_and_no_traceback(faults, fault, command):
    home, env = getattr(faults, fault)()
    result = run_gqa(home, COMMANDS[command], env)
    code, words = EXPECTED[fault][command]
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode == code, result.stderr
    if code == 0:
        assert "gqa: error" not in result.stderr
        return
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gqa: error: "), result.stderr
    assert words in lines[0]
    assert daemon_running(StatePaths(home)) is None if home.is_dir() else True   # no daemon was left running


def test_the_queue_works_again_once_the_fault_is_gone(faults):
    home, env = faults.locked()
    assert run_gqa(home, COMMANDS["submit"], env).returncode == 1
    faults.undo.pop()()          # the other process lets go
    result = run_gqa(home, COMMANDS["submit"], env)
    assert result.returncode == 0 and result.stdout == "2\n"    # job 1 existed; 2 was not handed out before
