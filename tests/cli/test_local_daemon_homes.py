"""`gqa local start|stop|status`: which home they act on, whose it is, and
what a stop or start the storage refuses leaves behind."""

import os
import subprocess

import pytest

from cli import local
from cli.main import main
from gqa.adapters.local import system
from gqa.adapters.local.log_stream import JobLog
from gqa.adapters.local.processes import process_token
from gqa.models.errors import SpecError, StorageFull, StorageUnavailable


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def shared_box(tmp_path, monkeypatch):
    """A system queue's home and a user with no ~/.gqa of their own."""
    box = tmp_path / "var-lib-gqa"
    box.mkdir()
    (box / system.MARKER).write_text(system.SystemSettings().to_json())
    monkeypatch.setattr(system, "SYSTEM_HOME", box)
    monkeypatch.delenv("GQA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    return box


def test_a_daemon_is_not_started_on_a_home_another_user_owns(tmp_path, monkeypatch):
    home = tmp_path / "q"
    home.mkdir(mode=0o700)
    monkeypatch.setattr(system.os, "geteuid", lambda: os.stat(home).st_uid + 4242)
    with pytest.raises(SpecError, match=r"is the queue of .*, not yours: start its daemon as .*--system"):
        system.private_home(home, tighten=True)
    system.private_home(home)   # a command that only reads it goes on to be refused by its files


def test_local_status_and_stop_find_the_system_queue(shared_box, monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, out, err = run(capsys, "local", "status")
    assert code == 0, err
    assert "daemon: stopped" in out and f"state:  {shared_box}" in out
    code, _, err = run(capsys, "local", "stop")
    assert code == 2 and f"the queue at {shared_box} serves every user" in err and "sudo gqa local stop" in err


def test_root_stops_the_system_queue_it_finds(shared_box, monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    asked = []
    monkeypatch.setattr("gqa.adapters.local.lock.daemon_running", lambda paths: asked.append(paths.home) or None)
    code, _, err = run(capsys, "local", "stop")
    assert code == 0 and asked == [shared_box] and "not running" in err


def test_a_stop_that_left_jobs_running_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GQA_HOME", str(tmp_path))
    job = subprocess.Popen(["sleep", "30"])
    try:
        monkeypatch.setattr("gqa.adapters.local.lock.daemon_running", lambda paths: 4321)
        monkeypatch.setattr(local, "_job_processes", lambda paths: [("7", job.pid, process_token(job.pid))])
        monkeypatch.setattr(local, "stop_daemon", lambda paths, **_: True)   # it exited, the job did not end
        code, _, err = run(capsys, "local", "stop")
    finally:
        job.kill()
        job.wait()
    assert code == 1
    assert "stopped, but could not stop job 7: still running, as --keep-jobs leaves them" in err
    assert "next `gqa local start` adopts them" in err


def test_the_jobs_a_stop_watches_are_those_still_running(tmp_path):
    done = subprocess.Popen(["true"])
    done.wait()
    alive = subprocess.Popen(["sleep", "30"])
    try:
        seen = [("1", done.pid, "1"), ("2", alive.pid, process_token(alive.pid))]
        assert local._still_running(seen) == ["2"]
    finally:
        alive.kill()
        alive.wait()


def test_a_start_the_full_disk_refuses_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    home = tmp_path / "q"
    monkeypatch.setenv("GQA_HOME", str(home))

    def full(paths, *args, **kwargs):
        paths.db.touch()   # as SQLite leaves it when the first write finds no space
        raise StorageFull(f"the disk holding {paths.db} is full; free space and retry: nothing was changed")

    monkeypatch.setattr(local, "_record_inventory", full)
    code, _, err = run(capsys, "local", "start", "--gpus", "1", "-d")
    assert code == 2 and "is full" in err
    assert not home.exists()


def test_a_failed_start_keeps_a_queue_that_was_there(tmp_path, monkeypatch, capsys):
    home = tmp_path / "q"
    home.mkdir(mode=0o700)
    (home / "gqa.db").write_bytes(b"x" * 10)
    monkeypatch.setenv("GQA_HOME", str(home))
    monkeypatch.setattr(local, "_record_inventory", lambda paths, *a, **k: (_ for _ in ()).throw(
        StorageFull("full")))
    code, _, _ = run(capsys, "local", "start", "--gpus", "1", "-d")
    assert code == 2
    assert sorted(p.name for p in home.iterdir()) == ["gqa.db"]


def deny_opening(monkeypatch, path) -> None:
    """os.open of `path` is refused, as a file root left among this user's is to them."""
    real_open = os.open

    def denied(p, flags, *args):
        if os.fspath(p) == str(path):
            raise PermissionError(13, "Permission denied", str(p))
        return real_open(p, flags, *args)

    monkeypatch.setattr(os, "open", denied)


def test_a_log_part_this_user_may_not_read_is_a_storage_error(tmp_path, monkeypatch):
    path = tmp_path / "2.log"
    path.write_bytes(b"hello\n")
    deny_opening(monkeypatch, path)
    with pytest.raises(StorageUnavailable, match="2.log"):
        list(JobLog(path).start())


def test_gqa_logs_of_a_log_this_user_may_not_read_is_one_line(cli, monkeypatch):
    # a queue whose daemon root once ran left root's log among the user's: a traceback, where
    # every other storage fault is one line and exit 2
    code, out, err = cli("submit", "--", "true")
    assert code == 0, err
    log = cli.home / "logs" / f"{out.strip()}.log"
    log.parent.mkdir(exist_ok=True)
    log.write_bytes(b"--- gqa: attempt 1\nhello\n")
    deny_opening(monkeypatch, log)
    code, out, err = cli("logs", out.strip())
    assert code == 2 and err.startswith("gqa: error: ") and str(log) in err and "Traceback" not in err
