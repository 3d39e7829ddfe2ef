"""An attempt that ends while the daemon cannot see it (paused, swapped out, busy
with a large request) keeps its own end: the daemon's next turn may come
past the attempt's wall time, or after a cancel was asked, before it collects
the end waiting on the attempt's pidfd. Nothing is signalled then, and a job
that exited 0 within its wall time succeeded: it never runs a second time.

The daemon is paused (SIGSTOP) past the wait it was in: it resumes with a
turn of the control loop before it reads what ended meanwhile."""

import os
import signal
import time

import pytest

from gqa.models.job import JobState

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def running(queue, job_id, timeout=20.0):
    queue.wait(job_id, states=("RUNNING",), timeout=timeout)


def paused(queue, seconds):
    os.kill(queue.pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(queue.pid, signal.SIGCONT)


def test_a_job_that_ended_within_its_wall_time_while_the_daemon_was_paused_succeeded_once(queue):
    [job_id] = queue.submit(["sh", "-c", "sleep 0.5; echo attempt $GQA_ATTEMPT done"],
                            limits={"wall_time": "4s", "on_timeout": "requeue"})
    running(queue, job_id)

    paused(queue, 6.0)    # it ends at 0.5 s; its wall time ends at 4 s, while the daemon still sleeps

    job = queue.wait(job_id, states=("SUCCEEDED", "FAILED", "TIMED_OUT", "RETRY_WAIT"))
    assert (job.state, job.reason, job.attempts) == (JobState.SUCCEEDED, "exit code 0", 1)
    assert [t.state for t in job.history].count(JobState.RUNNING) == 1
    assert "attempt 2" not in queue.log(job_id)


def test_a_cancel_asked_while_the_daemon_was_paused_leaves_a_job_that_ended_meanwhile_as_it_ended(queue):
    # a wall time keeps the daemon's wait short: the pause outlasts it
    [clock] = queue.submit(["sleep", "60"], limits={"wall_time": "3s"})
    [job_id] = queue.submit(["sh", "-c", "sleep 1; echo finished"])
    running(queue, clock)
    running(queue, job_id)

    os.kill(queue.pid, signal.SIGSTOP)
    try:
        queue.backend.control().cancel([job_id])
        time.sleep(4.5)       # it ends at 1 s, before the daemon could signal it
    finally:
        os.kill(queue.pid, signal.SIGCONT)

    job = queue.wait(job_id)
    assert (job.state, job.reason) == (JobState.SUCCEEDED, "exit code 0")
    assert queue.wait(clock).state == JobState.TIMED_OUT
