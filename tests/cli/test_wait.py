"""`gqa wait ID...`: blocks until the jobs end; one progress line rewritten in
place on a terminal, plain lines elsewhere; exit 0 / 1 / 124 and 2 for bad
input. The jobs here end by `gqa cancel` from the test while a real `gqa wait`
process waits (the daemon's part is tests/e2e/test_cli_daemon.py)."""

import json
import os
import pty
import select
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from cli.waiting import Progress, progress_line
from gqa.models.job import JobState as S
from tests.builders import job_record

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def jobs(*states):
    return [replace(job_record(id=f"1_{i}", group="1", array_index=i), state=s) for i, s in enumerate(states)]


@pytest.mark.parametrize("states, expected, seconds, line", [
    ((S.QUEUED, S.QUEUED), None, 0, "0 of 2 done; 2 pending; waited 0s"),
    ((S.SUCCEEDED, S.SUCCEEDED, S.FAILED, S.RUNNING, S.RUNNING, S.STARTING, S.QUEUED, S.HELD), None, 130,
     "3 of 8 done: 2 completed, 1 failed; 2 running, 1 starting, 1 held, 1 pending; waited 2m10s"),
    ((S.SUCCEEDED, S.CANCELLED), None, 5, "2 of 2 done: 1 completed, 1 cancelled; waited 5s"),
    ((S.SUCCEEDED,), 3, 1, "1 of 3 done: 1 completed; 2 not admitted yet; waited 1s"),
])
def test_the_progress_line_counts_done_and_live_jobs(states, expected, seconds, line):
    assert progress_line(jobs(*states), seconds, expected) == line


class Stream:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_off_a_terminal_a_line_is_written_only_when_the_counts_change():
    out = Stream()
    progress = Progress(out, tty=False)
    for seconds, states in [(0, (S.QUEUED,)), (1, (S.QUEUED,)), (2, (S.RUNNING,)), (3, (S.SUCCEEDED,))]:
        progress.show(jobs(*states), seconds)
    progress.end()
    assert out.text.splitlines() == ["0 of 1 done; 1 pending; waited 0s", "0 of 1 done; 1 running; waited 2s",
                                     "1 of 1 done: 1 completed; waited 3s"]


def test_on_a_terminal_the_line_is_rewritten_in_place_and_ended_once():
    out = Stream()
    progress = Progress(out, tty=True)
    progress.show(jobs(S.QUEUED), 0)
    progress.show(jobs(S.QUEUED), 1)
    progress.end()
    assert out.text == "\r0 of 1 done; 1 pending; waited 0s\x1b[K\r0 of 1 done; 1 pending; waited 1s\x1b[K\n"


def test_unknown_jobs_and_a_bad_timeout_are_one_line_and_exit_2(cli):
    assert cli("submit", "--", "true")[0] == 0
    for args, message in [(("wait", "1", "99"), "no job or array 99"),
                          (("wait", "1", "--timeout", "soon"), "--timeout: invalid duration 'soon'"),
                          (("wait", "1", "--timeout", "0"), "--timeout: duration must be positive")]:
        code, out, err = cli(*args)
        assert (code, out, err.count("\n")) == (2, "", 1) and err.startswith("gqa: error: ") and message in err


def test_jobs_that_ended_without_completing_exit_1_with_their_final_states(cli):
    cli("submit", "--array", "0-2", "--", "true")
    cli("cancel", "1_1")
    cli("cancel", "1")
    code, out, err = cli("wait", "1", "1_1", "-o", "json")   # a task and its array: each job once
    data = json.loads(out)
    assert code == 1 and not data["timed_out"]
    assert [(j["id"], j["status"]) for j in data["jobs"]] == [("1_0", "cancelled"), ("1_1", "cancelled"),
                                                              ("1_2", "cancelled")]
    assert data["counts"] == {"cancelled": 3}


def test_the_timeout_exits_124_and_says_how_many_had_not_ended(cli):
    cli("submit", "--array", "0-1", "--", "true")
    started = time.monotonic()
    code, out, err = cli("wait", "1", "--timeout", "1")
    assert code == 124 and 1 <= time.monotonic() - started < 5
    assert "gqa: error: timed out after 1s: 2 of 2 jobs had not ended" in err


def _wait_process(home, *args, tty: bool):
    """`gqa wait` as a real process, its stderr on a terminal (pty) or a pipe, and what it writes there."""
    env = dict(os.environ, GQA_HOME=str(home), PYTHONPATH=ROOT)
    if not tty:
        proc = subprocess.Popen([sys.executable, "-m", "cli.main", "wait", *args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return proc, _Written(proc.stderr.fileno())
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "wait", *args], env=env,
                            stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    return proc, _Written(leader)


class _Written:
    """What a process writes to an fd, read as it comes."""

    def __init__(self, fd: int):
        self.fd, self.text = fd, ""

    def _read(self, timeout: float) -> bool:
        if not select.select([self.fd], [], [], timeout)[0]:
            return True
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:        # a pty whose process ended and closed its side
            chunk = b""
        self.text += chunk.decode(errors="replace")
        return bool(chunk)

    def until(self, text: str, timeout: float = 20.0) -> None:
        """Read until `text` was written: a loaded machine may take seconds to start Python."""
        deadline = time.monotonic() + timeout
        while text not in self.text:
            left = deadline - time.monotonic()
            assert left > 0 and self._read(min(left, 0.1)), f"never wrote {text!r}; wrote {self.text!r}"

    def all(self) -> str:
        """Everything, once the process has ended and closed its side."""
        while select.select([self.fd], [], [], 10)[0] and self._read(0):
            pass
        return self.text


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_a_real_wait_follows_the_jobs_as_they_end(cli, tty):
    cli("submit", "--array", "0-1", "--", "true")
    proc, written = _wait_process(cli.home, "1", tty=tty)
    written.until("0 of 2 done")
    cli("cancel", "1_0")
    written.until("1 of 2 done")
    cli("cancel", "1_1")
    proc.wait(timeout=10)
    err = written.all()
    assert proc.returncode == 1
    assert "1 of 2 done: 1 cancelled; 1 pending" in err and "2 of 2 done: 2 cancelled" in err
    assert "job 1_0 cancelled" in err and "job 1_1 cancelled" in err
    if tty:
        assert "\r0 of 2 done; 2 pending; waited" in err and "\x1b[K" in err
    else:
        assert "\r" not in err and "\x1b" not in err
        assert err.count("0 of 2 done") == 1          # one line per change, not per poll


@pytest.mark.aws
@pytest.mark.slow
def test_on_aws_a_job_not_admitted_yet_is_waited_for_and_an_ended_one_tells_its_state(aws):
    assert aws("alice", "submit", "--", "python", "train.py")[:2] == (0, "1\n")
    code, _, err = aws("alice", "wait", "1", "--timeout", "1")      # accepted, not yet admitted: not an error
    assert code == 124 and "timed out after 1s: 0 of 0 jobs had not ended; 1 not admitted yet" in err
    aws.admit()
    assert aws("alice", "cancel", "1")[0] == 0
    aws.gateway.seen.clear()
    code, out, _ = aws("alice", "wait", "1", "-o", "json")
    assert code == 1 and json.loads(out)["jobs"][0]["status"] == "cancelled"
    # its polls leave the transitions out, which `gqa status` asks for
    assert [r["url"].rsplit("/", 1)[-1] for r in aws.gateway.seen] == ["1?history=false"]
    aws.gateway.seen.clear()
    assert aws("alice", "status", "1")[0] == 0
    assert [r["url"].rsplit("/", 1)[-1] for r in aws.gateway.seen] == ["1"]
    code, _, err = aws("alice", "wait", "7")
    assert code == 2 and "no job or array 7" in err


class SlowQueue:
    """A backend whose every read of the group takes `read` seconds of a fake clock, pending until `ends`."""

    local, poll_interval = True, 0.2

    def __init__(self, read: float, ends: int):
        self.now, self.read, self.reads, self.ends, self.pauses = 0.0, read, 0, ends, []
        self.asked: list[bool] = []

    def queries(self):
        return self

    def daemon_pid(self):
        return 1

    def jobs(self, ref, *, history=True):
        self.asked.append(history)
        self.now += self.read
        self.reads += 1
        return jobs(S.SUCCEEDED if self.reads >= self.ends else S.QUEUED)

    def queue(self, group=None):
        """The queue `gqa wait` reads at its timeout for the pending jobs' reasons: nothing listed."""
        from gqa.services.queries import QueueView

        return QueueView([], [], 0, 0, None)

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.pauses.append(round(seconds, 6))
        self.now += seconds


@pytest.mark.parametrize("read, pauses", [
    (0.01, [0.2, 0.2]),         # a quick read: the backend's poll interval
    (0.5, [4.5, 4.5]),          # a slow one (a large array): 9 times as long, so reads are a tenth of the wait
])
def test_polls_without_transitions_and_spaced_by_the_cost_of_a_read(monkeypatch, read, pauses):
    from cli import backend, waiting

    fake = SlowQueue(read, ends=3)
    monkeypatch.setattr(backend, "backend", lambda: fake)
    monkeypatch.setattr(waiting, "time", fake)
    waited = waiting.wait_all(["1"])
    assert (waited.code, fake.pauses, fake.asked) == (0, pauses, [False] * 3)


def test_a_slow_read_never_pauses_past_the_timeout(monkeypatch):
    from cli import backend, waiting

    fake = SlowQueue(0.5, ends=99)
    monkeypatch.setattr(backend, "backend", lambda: fake)
    monkeypatch.setattr(waiting, "time", fake)
    waited = waiting.wait_all(["1"], timeout=2.0)
    assert waited.timed_out and fake.pauses == [1.5] and waited.code == 124


def test_a_wait_while_the_daemon_is_down_says_so_once(cli):
    cli("submit", "--", "true")
    code, _, err = cli("wait", "1", "--timeout", "1")
    assert code == 124 and err.count("note: the queue daemon is not running; these jobs move only once") == 1
