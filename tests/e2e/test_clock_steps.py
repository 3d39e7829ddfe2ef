"""The executor's side of a wall clock being set, with real processes: it
says when an attempt began from the kernel's start time on the boot clock
(AttemptClock), in the frame of whatever the wall clock reads now, and it
keeps Slurm's --signal warning on the monotonic clock, so a step neither
sends it early nor holds it back."""

import os
import signal
import time
from dataclasses import replace

import pytest

from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.processes import process_token
from gqa.ports import Inventory
from tests.builders import gpus, job_record

pytestmark = pytest.mark.e2e
HOURS_3 = 3 * 3600.0


@pytest.fixture
def executor(tmp_path):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    return LocalExecutor(paths, Inventory(gpus=gpus(2)))


def started(executor, tmp_path, script, **limits):
    """A RUNNING record of a launched and released attempt, as the supervisor writes it."""
    job = job_record(id="7", spec={"command": ["bash", "-c", script], "workdir": str(tmp_path),
                                   "limits": limits})
    launched = executor.launch(job, (0,), 1)
    at = time.time()
    executor.release([job.id])
    return replace(job, attempts=1, pid=launched.pid, proc_token=launched.token, started_at=at)


def test_an_attempt_began_when_its_process_did_on_whatever_the_wall_clock_reads_now(executor, tmp_path):
    job = started(executor, tmp_path, "sleep 30")
    try:
        time.sleep(0.3)
        now = time.time()
        assert abs(executor.began([job], now)[job.id] - job.started_at) < 0.2
        # the same moment, asked of a clock set 3 h forward since: 3 h later on it
        assert abs(executor.began([job], now + HOURS_3)[job.id] - (job.started_at + HOURS_3)) < 0.2
    finally:
        os.killpg(job.pid, signal.SIGKILL)


def test_an_attempt_that_ended_is_still_placed_until_forgotten_and_one_never_known_is_left_out(executor, tmp_path):
    """Its end, collected in the turn the clock stepped, is settled after the starts moved: it must move too.
    One the executor neither launched nor adopted, its process gone, may be a token of another boot."""
    job = started(executor, tmp_path, "exit 0")
    deadline = time.monotonic() + 5
    while process_token(job.pid) == job.proc_token and time.monotonic() < deadline:
        time.sleep(0.02)
    now = time.time()
    assert abs(executor.began([job], now + HOURS_3)[job.id] - (job.started_at + HOURS_3)) < 0.5
    stranger = LocalExecutor(executor.paths, Inventory(gpus=gpus(2)))   # a restarted daemon's
    assert stranger.began([job], now) == {}
    assert executor.began([replace(job, proc_token="12")], now) == {}   # not the token it launched
    executor.forget(job)
    assert executor.began([job], now) == {}


def test_a_step_of_the_wall_clock_does_not_send_the_warning_early(executor, tmp_path, monkeypatch):
    job = started(executor, tmp_path, "trap 'echo warned > warned.txt' USR1; for i in $(seq 1 100); do sleep 0.1; done",
                  wall_time="120s", signal="B:USR1@60")   # due 60 s in
    try:
        time.sleep(0.5)   # its trap is set
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + HOURS_3)   # everything reading the wall clock sees it
        for _ in range(5):
            executor.kill_overdue()
            time.sleep(0.1)
        assert not (tmp_path / "warned.txt").exists()
        assert executor.next_kill() > 50
    finally:
        os.killpg(job.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_daemon_restarted_after_the_clock_was_set_keeps_a_running_job_to_its_wall_time(queue):
    """Its start was stamped 3 h back on a clock set forward since, while the daemon was down
    (a machine that booted with its clock off, then synced): the restarted daemon puts the start
    where the boot clock has it, rather than stopping a job a few seconds in as 3 h past 10 minutes."""
    from gqa.models.job import JobState
    from gqa.ports import Change

    [job_id] = queue.submit(["sleep", "60"], limits={"wall_time": "10m"})
    queue.wait(job_id, states=("RUNNING",))
    queue.crash()   # the job runs on
    job = queue.job(job_id)
    queue.backend.store.apply([Change(job_id, JobState.RUNNING, None, "", time.time(),
                                      {"started_at": job.started_at - HOURS_3})])

    queue.start()
    time.sleep(2.0)

    now = queue.job(job_id)
    assert (now.state, now.kill_reason) == (JobState.RUNNING, None)
    assert abs(now.started_at - job.started_at) < 1.0
    queue.backend.control().cancel([job_id])
    assert queue.wait(job_id).state == JobState.CANCELLED
