"""The daemon's life around its clients: two `gqa local start` at once leave
the queue the winner's alone; SIGHUP and SIGUSR1 are logged, not fatal; a
stopped daemon is named early, and a submission it never read is dropped,
not recorded behind the back of a user told it failed."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.store import SqliteStore
from tests.e2e.conftest import ROOT, pid_alive

pytestmark = pytest.mark.e2e


def light_gqa(env, *args):
    return subprocess.Popen([sys.executable, "-c", "from cli.client import run; run()", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def gpus_in_store(home) -> list[tuple[int, str, float]]:
    store = SqliteStore(home / "gqa.db")
    try:
        return [(g.index, g.type, g.price) for g in store.inventory().gpus]
    finally:
        store.close()


def stop(home) -> None:
    from cli.local import stop_daemon

    assert stop_daemon(StatePaths(home), timeout=30)


SMALL = ("--gpus", "2")
BIG = ("--gpus", "8", "--gpu-type", "big", "--price", "9.99")
WROTE = {SMALL: [(0, "virtual", 0.0), (1, "virtual", 0.0)], BIG: [(i, "big", 9.99) for i in range(8)]}


@pytest.mark.slow
def test_two_starts_at_once_leave_the_winners_inventory_alone(tmp_path):
    """Racing for real, round after round (bounded in time): one start wins, the other
    is refused, and the queue lists the GPUs the running daemon was started with."""
    deadline, rounds = time.monotonic() + 60, 0
    while rounds < 6 and time.monotonic() < deadline:
        home = tmp_path / f"home{rounds}"
        env = dict(os.environ, GQA_HOME=str(home), PYTHONPATH=str(ROOT))
        first, second = (SMALL, BIG) if rounds % 2 else (BIG, SMALL)
        procs = {}
        for options in (first, second):
            procs[options] = light_gqa(env, "local", "start", *options, "--grace", "1", "--detach")
        said = {options: proc.communicate(timeout=60) for options, proc in procs.items()}
        try:
            won = [o for o, p in procs.items() if p.returncode == 0]
            assert len(won) == 1, said
            [lost] = [o for o in procs if o != won[0]]
            assert "already" in said[lost][1], said[lost]
            assert gpus_in_store(home) == WROTE[won[0]], (rounds, said)
        finally:
            stop(home)
        rounds += 1
    assert rounds >= 2


def test_a_start_refused_after_its_check_writes_nothing_over_the_running_queue(tmp_path, monkeypatch):
    """The race made certain: the other daemon starts and takes the home while this start
    finds its GPUs, after it saw no daemon running."""
    import cli.local
    from cli.main import main

    home = tmp_path / "home"
    monkeypatch.setenv("GQA_HOME", str(home))
    found = cli.local._inventory

    def the_other_wins_meanwhile(*args, **kwargs):
        inventory = found(*args, **kwargs)
        cli.local.start_background(StatePaths(home), {"gpus": [{"index": i, "type": "virtual", "price": 0.0}
                                                               for i in range(2)], "cpus": None, "memory": None}, 1.0)
        return inventory

    monkeypatch.setattr(cli.local, "_inventory", the_other_wins_meanwhile)
    try:
        code = main(["local", "start", *BIG, "--detach"])
        assert code != 0
        assert gpus_in_store(home) == WROTE[SMALL]
    finally:
        stop(home)


def test_hangup_and_usr1_are_logged_and_the_daemon_goes_on(queue):
    for signum in (signal.SIGHUP, signal.SIGUSR1):
        os.kill(queue.pid, signum)
    time.sleep(0.5)
    from cli.local import daemon_status

    assert daemon_status(StatePaths(queue.home), timeout=10)["pid"] == queue.pid
    [job] = queue.submit(["true"])
    assert queue.wait(job).state.value == "SUCCEEDED"
    log = (queue.home / "daemon.log").read_text()
    assert "SIGHUP ignored" in log and "SIGUSR1 ignored" in log
    queue.stop()
    assert f"daemon {queue.pid} stopped" in (queue.home / "daemon.log").read_text()


def test_a_foreground_daemon_outlives_its_terminals_hangup_and_stops_on_sigterm(tmp_path):
    from cli.local import daemon_status

    home = tmp_path / "home"
    env = dict(os.environ, GQA_HOME=str(home), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "local", "start", "--gpus", "1", "--grace", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while daemon_status(StatePaths(home), timeout=2) is None:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout and proc.stdout.read()
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGHUP)      # as its terminal closing sends
        time.sleep(0.5)
        assert proc.poll() is None and daemon_status(StatePaths(home), timeout=10)["pid"] == proc.pid
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "SIGHUP ignored" in out and f"daemon {proc.pid} stopped" in out, out


@pytest.mark.slow
def test_a_stopped_daemon_is_named_at_once_and_a_submission_it_never_read_is_dropped(queue, monkeypatch, capsys):
    from cli import client, daemon_socket

    monkeypatch.setenv("GQA_HOME", str(queue.home))
    monkeypatch.setenv("GQA_CONFIG", str(queue.home / "no-config"))
    monkeypatch.setattr(daemon_socket, "SLOW_AFTER", 0.5)
    monkeypatch.setattr(daemon_socket, "REPLY_TIMEOUT", 2.0)
    monkeypatch.setattr(sys, "argv", ["gqa", "submit", "--", "true"])
    os.kill(queue.pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        with pytest.raises(SystemExit) as exited:
            client.run()
        took = time.monotonic() - began
        err = capsys.readouterr().err
        status = queue.cli("local", "status")
        as_json = json.loads(queue.cli("local", "status", "-o", "json").stdout)
    finally:
        os.kill(queue.pid, signal.SIGCONT)
    pid = queue.pid
    assert exited.value.code == 1 and took < 10, (took, err)
    waiting, error = err.splitlines()
    assert re.fullmatch(rf"gqa: waiting for the queue daemon \(pid {pid}\), which has not answered for \d s: "
                        rf"it is stopped \(`kill -CONT {pid}` resumes it\)", waiting), waiting
    assert error == (f"gqa: error: the queue daemon (pid {pid}) did not answer within 2 s: it is stopped "
                     f"(`kill -CONT {pid}` resumes it); nothing was submitted")
    assert status.returncode == 0
    assert status.stdout.splitlines()[0] == (f"daemon: running (pid {pid}) but not answering: no answer within "
                                             f"3 s: it is stopped (`kill -CONT {pid}` resumes it)")
    assert as_json["running"] is True and as_json["answering"] is False
    from cli.local import daemon_status

    assert daemon_status(StatePaths(queue.home), timeout=10) is not None   # it goes on
    time.sleep(0.5)
    assert queue.backend.store.state_counts() == {}                          # nothing was recorded
    assert pid_alive(queue.pid) and "dropped POST /cli/submit" in (queue.home / "daemon.log").read_text()
