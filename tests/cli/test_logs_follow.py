"""`gqa logs` on a remote backend: the follow loop over a scripted pager
(pages, then done), the waits between polls, Ctrl-C, --tail, and the
command's wiring to a backend that hands out log pages. Locally: the log
file's rotated parts read as one, from the end and while following, and
one attempt of it by the line heading each."""

from __future__ import annotations

import io
import time

import pytest

import cli.backend
from cli.logs import POLL_INTERVAL, follow_pages
from cli.main import main
from gqa.adapters.local.log_rotation import LogLimits, rotate_if_needed
from gqa.models.errors import NotFound, NotStarted
from gqa.models.job import JobState
from gqa.ports import Change
from gqa.services.logs import LogPage


class ScriptedPager:
    """Answers page() with the next step: a LogPage, or an error to raise.
    Running out of steps is a test failure (the loop polled too long)."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.asked: list[tuple[str, int | None, str | None]] = []

    def page(self, ref, attempt=None, token=None):
        self.asked.append((ref, attempt, token))
        assert self.steps, "polled after the last page"
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def page(n: int, *lines: str, done: bool = False, attempt: int = 1) -> LogPage:
    return LogPage(tuple(lines), f"t{n}", attempt, done)


class Sleeps(list):
    """The sleep the loop is given: records each wait; `interrupt_after` waits, Ctrl-C."""

    def __init__(self, interrupt_after: int | None = None):
        super().__init__()
        self.interrupt_after = interrupt_after

    def __call__(self, seconds: float) -> None:
        if self.interrupt_after is not None and len(self) == self.interrupt_after:
            raise KeyboardInterrupt
        self.append(seconds)


def run(pager, **kwargs) -> tuple[int, str, Sleeps]:
    out = io.StringIO()
    sleeps = kwargs.pop("sleep", Sleeps())
    code = follow_pages(pager, "12", out=out, sleep=sleeps, **kwargs)
    return code, out.getvalue(), sleeps


def test_without_follow_what_is_there_now_is_printed_and_nothing_waited_for():
    pager = ScriptedPager(page(1, "a", "b"), page(2, "c"), page(3))
    code, out, sleeps = run(pager)
    assert (code, out, sleeps) == (0, "a\nb\nc\n", [])
    assert [token for _, _, token in pager.asked] == [None, "t1", "t2"]


def test_follow_polls_each_interval_once_caught_up_until_done():
    pager = ScriptedPager(page(1, "a"), page(2), page(3), page(4, "b"), page(5, "c", done=True))
    code, out, sleeps = run(pager, follow=True)
    assert (code, out) == (0, "a\nb\nc\n")
    assert sleeps == [POLL_INTERVAL, POLL_INTERVAL]          # after each empty page, not after full ones
    assert [token for _, _, token in pager.asked] == [None, "t1", "t2", "t3", "t4"]


def test_done_ends_even_without_follow_and_the_attempt_is_passed_on():
    pager = ScriptedPager(page(1, "x", done=True, attempt=2))
    code, out, _ = run(pager, attempt=2)
    assert (code, out, pager.asked) == (0, "x\n", [("12", 2, None)])


def test_ctrl_c_while_following_exits_130_after_what_was_printed():
    pager = ScriptedPager(page(1, "a"), page(2), page(3))
    code, out, sleeps = run(pager, follow=True, sleep=Sleeps(interrupt_after=1))
    assert (code, out, len(sleeps)) == (130, "a\n", 1)


def test_a_job_not_started_is_waited_for_when_following(capsys):
    waiting = NotStarted("job 12 has not started yet; it is QUEUED: needs 4 GPUs of a10g, 2 free")
    pager = ScriptedPager(waiting, waiting, page(1, "--- gqa: attempt 1 of job 12", "hello", done=True))
    code, out, sleeps = run(pager, follow=True)
    assert (code, out, sleeps) == (0, "--- gqa: attempt 1 of job 12\nhello\n", [POLL_INTERVAL, POLL_INTERVAL])
    assert capsys.readouterr().err == ("job 12 has not started yet; it is QUEUED: needs 4 GPUs of a10g, 2 free; "
                                       "waiting for it to start\n")


def test_a_job_not_started_is_reported_without_follow(capsys):
    pager = ScriptedPager(NotStarted("job 12 has not started yet; it is QUEUED"))
    code, out, sleeps = run(pager)
    assert (code, out, sleeps) == (0, "", [])
    assert capsys.readouterr().err == "job 12 has not started yet; it is QUEUED\n"


def test_other_errors_reach_the_caller():
    with pytest.raises(NotFound):
        run(ScriptedPager(NotFound("no job or array 12")), follow=True)


@pytest.mark.parametrize("follow, steps, printed", [
    (False, [page(1, "a", "b", "c"), page(2, "d"), page(3)], "c\nd\n"),
    (False, [page(1, "a", "b", "c", done=True)], "b\nc\n"),
    (True, [page(1, "a", "b", "c"), page(2), page(3, "d"), page(4, "e", done=True)], "b\nc\nd\ne\n"),
])
def test_tail_keeps_the_last_lines_of_what_is_there_then_follows_in_full(follow, steps, printed):
    code, out, _ = run(ScriptedPager(*steps), follow=follow, tail=2)
    assert (code, out) == (0, printed)


# -- the command ----------------------------------------------------------------------------------------

class RemoteBackend:
    def __init__(self, pager):
        self.pager = pager

    def log_pages(self):
        return self.pager


@pytest.fixture
def remote(monkeypatch):
    def use(*steps) -> ScriptedPager:
        pager = ScriptedPager(*steps)
        monkeypatch.setattr(cli.backend, "backend", lambda: RemoteBackend(pager))
        monkeypatch.setattr("cli.logs.time.sleep", lambda seconds: None)
        return pager
    return use


def test_the_command_follows_a_remote_backend(remote, capsys):
    pager = remote(page(1, "a"), page(2), page(3, "b", done=True, attempt=2))
    assert main(["logs", "12", "-f", "--attempt", "2"]) == 0
    assert capsys.readouterr().out == "a\nb\n"
    assert {asked[:2] for asked in pager.asked} == {("12", 2)}


def test_the_command_turns_an_unknown_job_into_exit_2(remote, capsys):
    remote(NotFound("no job or array 99"))
    assert main(["logs", "99"]) == 2
    assert capsys.readouterr().err == "gqa: error: no job or array 99\n"


def test_the_command_exits_130_on_ctrl_c(remote, monkeypatch):
    remote(page(1), page(2))

    def interrupted(seconds):
        raise KeyboardInterrupt
    monkeypatch.setattr("cli.logs.time.sleep", interrupted)
    assert main(["logs", "12", "-f"]) == 130


@pytest.mark.parametrize("args, message", [
    (["logs", "1", "--tail", "-1"], "--tail takes a number of lines, 0 or more, not -1"),
])
def test_local_refusals(cli, args, message):
    code, _, err = cli(*args)
    assert code == 2 and message in err


# -- the local log file ----------------------------------------------------------------------------------

def _local_job(cli, state=JobState.RUNNING):
    cli.json("submit", "--", "true")
    now = time.time()
    for to in (JobState.STARTING, JobState.RUNNING, JobState.SUCCEEDED):
        if cli.store.get("1").state == state:
            break
        cli.store.apply([Change("1", cli.store.get("1").state, to, "test", now)])
    return cli.home / "logs" / "1.log"


def _numbered(first, last):
    return "".join(f"line {i}\n" for i in range(first, last + 1))


def _rotated_log(path, limits=LogLimits(10, keep=1)):
    for first in (1, 4, 7):              # lines 1-3 dropped, 4-6 in 1.log.1, 7-9 live
        path.write_text(_numbered(first, first + 2))
        if first < 7:
            rotate_if_needed(path, limits)


@pytest.mark.parametrize("args, printed", [
    (["-n", "2"], _numbered(8, 9)),
    (["-n", "4"], _numbered(6, 9)),
    ([], "--- gqa: 21 bytes of earlier output rotated away (log cap 10 bytes x 1)\n" + _numbered(4, 9)),
])
def test_the_local_log_reads_its_rotated_parts_as_one(cli, args, printed):
    _rotated_log(_local_job(cli, JobState.SUCCEEDED))
    code, out, _ = cli("logs", "1", *args)
    assert (code, out) == (0, printed)


def test_following_the_local_log_prints_each_line_once_across_a_rotation(cli, monkeypatch):
    path = _local_job(cli)
    path.write_text(_numbered(1, 3))
    steps = []

    def sleep(seconds):
        steps.append(seconds)
        if len(steps) == 1:               # the job writes, the daemon rotates, the job writes on
            with open(path, "a") as job:
                job.write(_numbered(4, 5))
                job.flush()
                rotate_if_needed(path, LogLimits(10, keep=2))
                job.write("partial")
        else:                             # it ends
            cli.store.apply([Change("1", JobState.RUNNING, JobState.SUCCEEDED, "test", time.time())])

    monkeypatch.setattr("cli.logs.time.sleep", sleep)
    code, out, _ = cli("logs", "1", "-f", "-n", "2")
    assert (code, out) == (0, _numbered(2, 5) + "partial\n")
    assert len(steps) == 2


def _two_attempts(cli):
    """Job 1 ran twice; its log holds both attempts, each headed by the launcher's line."""
    path = _local_job(cli, JobState.SUCCEEDED)
    cli.store.apply([Change("1", JobState.SUCCEEDED, None, "", time.time(), {"attempts": 2})])
    path.write_text("--- gqa: attempt 1 of job 1 on GPU 0 at 10:00: true\nfirst\nout of memory\n"
                    "--- gqa: attempt 2 of job 1 on GPU 1 at 10:05: true\nsecond\ndone\n")


@pytest.mark.parametrize("args, lines", [
    (["--attempt", "1"], ["first", "out of memory"]),
    (["--attempt", "2"], ["second", "done"]),
    (["--attempt", "2", "-n", "1"], ["done"]),
])
def test_the_local_log_gives_one_attempt(cli, args, lines):
    _two_attempts(cli)
    code, out, err = cli("logs", "1", *args)
    assert (code, err) == (0, "")
    assert [line for line in out.splitlines() if not line.startswith("--- gqa: attempt")] == lines


@pytest.mark.parametrize("args, message", [
    (["--attempt", "3"], "attempt 3"),
    (["--attempt", "0"], "attempts are numbered from 1, not 0"),
])
def test_an_attempt_the_local_job_has_not_had_is_named(cli, args, message):
    _two_attempts(cli)
    code, out, err = cli("logs", "1", *args)
    assert (code, out) == (2, "") and message in err


def test_a_job_that_ended_before_it_ran_says_so_not_no_output_yet(cli):
    cli("submit", "--", "true")
    cli("cancel", "1")
    for args in (("logs", "1"), ("logs", "1", "-f")):
        code, out, err = cli(*args)
        assert (code, out) == (0, "")
        assert err == "job 1 has no output: it ended cancelled before it ever ran (cancelled by user)\n"
