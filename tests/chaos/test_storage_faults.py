"""The state under the daemon goes bad while jobs run and end: the disk
fills, the home turns read-only, another process holds the database's write
lock past the lock timeout. The daemon keeps answering and does not die,
commands during the fault succeed or say one line, and once the fault ends
the queue drains with nothing lost, run twice or stuck.

The disk and read-only faults need root (a tmpfs, a read-only bind mount);
without it they are skipped: the storage adapter's own tests inject those
errors (tests/contract/test_sqlite_faults.py)."""

import contextlib
import errno
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from .harness import alive, one_line_error

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs or a read-only view; "
                                                          "the storage adapter's own tests inject these errors")
JOBS, SECONDS = 8, 0.5


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30)


def unmount(path) -> None:
    for _ in range(20):
        if _run("umount", str(path)).returncode == 0:
            return
        time.sleep(0.1)
    _run("umount", "-l", str(path))


@pytest.fixture
def small_disk(tmp_path):
    """An 8 MiB tmpfs, unmounted after the test (and after its daemon is gone)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = _run("mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(where))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        unmount(where)


def fill(path) -> int:
    """Write zeros to `path` until the disk is full; returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as fh:
        chunk = b"\0" * 65536
        while True:
            try:
                written += fh.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
    for size in (4096, 512, 1):   # the last partial blocks too
        with contextlib.suppress(OSError), open(path, "ab", buffering=0) as fh:
            while True:
                written += fh.write(b"\0" * size)
    return written


def wait_running(chaos, n: int = 1, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for j in chaos.jobs().values() if j.state.value == "RUNNING") < n:
        assert time.monotonic() < deadline, "no job started"
        time.sleep(0.05)


def commands_during_the_fault(chaos, env: dict | None = None) -> tuple[list[str], int]:
    """What a user types while the fault lasts; each succeeds or says one line.
    Returns the ids of the jobs submitted meanwhile, and how many commands refused."""
    ids, refused = [], 0
    submit = ("submit", "--name", "during", "--", *chaos.job_command("run", "0.1"))
    for args, light in ((submit, True), (("queue",), False), (("status", "1"), False), (("local", "status"), False)):
        proc = chaos.cli(*args, light=light, env=env, timeout=60)
        assert proc.returncode == 0 or one_line_error(proc), (args, proc.returncode, proc.stderr)
        if proc.returncode != 0:
            refused += 1
        elif args[0] == "submit":
            ids.append(proc.stdout.strip())
    return ids, refused


@needs_root
def test_a_full_disk_under_running_jobs(small_disk, make_chaos):
    chaos = make_chaos(home=small_disk / "home", gpus=2)
    daemon = chaos.start()
    ids = chaos.submit(JOBS, SECONDS)
    wait_running(chaos)

    filler = small_disk / "filler"
    filled = fill(filler)
    during, refused = commands_during_the_fault(chaos)
    time.sleep(2 * SECONDS)          # jobs end and are launched while the disk is full
    assert alive(daemon), "the daemon died of a full disk"
    # the jobs that ended read as running until their ends are recorded: those who look are told why
    deadline, told = time.monotonic() + 30, ""
    while "note: the queue daemon has failed at " not in told and time.monotonic() < deadline:
        time.sleep(1)
        told = chaos.cli("queue", light=True, timeout=60).stderr
    assert "note: the queue daemon has failed at recording exits for " in told and "is full" in told, told
    filler.unlink()

    chaos.check("disk full under running jobs", ids + during, once=True, filled_mib=round(filled / 2**20, 1),
                refused=refused)
    assert alive(daemon)


@needs_root
def test_a_read_only_home_under_running_jobs(make_chaos):
    chaos = make_chaos(gpus=2)
    daemon = chaos.start()
    ids = chaos.submit(JOBS, SECONDS)
    wait_running(chaos)

    # a read-only view of the home over itself: what the daemon opens from now on is read-only
    assert _run("mount", "--bind", str(chaos.home), str(chaos.home)).returncode == 0
    try:
        assert _run("mount", "-o", "remount,bind,ro", str(chaos.home)).returncode == 0
        with pytest.raises(OSError):
            (chaos.home / "probe").write_text("x")
        during, refused = commands_during_the_fault(chaos)
        time.sleep(2 * SECONDS)
        assert alive(daemon), "the daemon died of a read-only home"
    finally:
        unmount(chaos.home)

    chaos.check("read-only home under running jobs", ids + during, once=True, refused=refused)
    assert alive(daemon)


class LockHolder:
    """Another process holding BEGIN IMMEDIATE on the queue database for `seconds`."""

    def __init__(self, db, seconds: float):
        code = ("import sqlite3, sys, time; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
                "db.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(float(sys.argv[2])); "
                "db.execute('COMMIT')")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(db), str(seconds)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def wait(self) -> None:
        assert self.proc.wait(timeout=30) == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_a_lock_held_past_the_lock_timeout(chaos):
    from cli.local import daemon_status
    from gqa.adapters.local.paths import StatePaths

    timeout = {"GQA_LOCK_TIMEOUT": "0.5"}
    daemon = chaos.start(**timeout)
    ids = chaos.submit(JOBS, SECONDS)
    wait_running(chaos)

    holder = LockHolder(chaos.home / "gqa.db", 4.0)
    try:
        began = time.monotonic()
        assert daemon_status(StatePaths(chaos.home)) is not None, "the daemon stopped answering"
        answered = time.monotonic() - began
        during, refused = commands_during_the_fault(chaos, env=timeout)
        assert alive(daemon), "the daemon died of a locked database"
        holder.wait()
    finally:
        holder.kill()

    chaos.check("lock held 4 s (timeout 0.5 s)", ids + during, once=True, refused=refused,
                status_answered_s=round(answered, 2))
    assert alive(daemon)
    assert sqlite3.connect(chaos.home / "gqa.db").execute("PRAGMA integrity_check").fetchone() == ("ok",)
