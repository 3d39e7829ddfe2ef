"""A job's pid outlives its process: once the process has ended, the pid may be
anyone's (after a reboot, pids start low: a shell, tmux, sshd). The executor
signals an attempt's group only while the pid is still the process recorded
with it (its start-time token), and a restarted daemon that finds a job's
process gone leaves the process now holding its pid alone."""

import os
import select
import signal
import subprocess
import time

import pytest

from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.processes import process_token
from gqa.models.job import JobState
from gqa.ports import Change, Inventory
from tests.builders import gpus, job_record
from tests.services.conftest import Queue

pytestmark = pytest.mark.e2e


@pytest.fixture
def executor(tmp_path):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    return LocalExecutor(paths, Inventory(gpus=gpus(2)))


@pytest.fixture
def unrelated():
    """Someone else's process, leading its own group and session, as `setsid sleep` does."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def survives(proc, seconds=0.3) -> bool:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return True
    return False


def dead_job_on(pid: int, token: str | None = "1", **fields):
    """A RUNNING job whose recorded process had `pid`, started at `token` (the default no live process has)."""
    return job_record(state=JobState.RUNNING, attempts=1, pid=pid, proc_token=token, started_at=time.time(),
                      **fields)


def test_cleanup_leaves_alone_the_process_that_took_a_dead_jobs_pid(executor, unrelated):
    executor.cleanup(dead_job_on(unrelated.pid))
    assert survives(unrelated)

    executor.cleanup(dead_job_on(unrelated.pid, process_token(unrelated.pid)))   # it is the job's: killed
    assert unrelated.wait(timeout=5) == -signal.SIGKILL


def test_a_stop_of_a_readopted_attempt_whose_pid_is_anothers_signals_nothing(executor, unrelated):
    job = dead_job_on(unrelated.pid)
    executor.adopt(job)

    executor.terminate(job, grace=0.0)
    executor.kill_overdue()

    assert survives(unrelated)


def test_a_restarted_supervisor_leaves_alone_the_process_that_took_a_dead_jobs_pid(tmp_path, unrelated):
    """recover() finds the job's process gone (another process has its pid, with another start
    time): the job goes back to the queue, and the process holding the pid lives on."""
    from gqa.adapters.local.store import SqliteStore

    store = SqliteStore(tmp_path / "gqa.db")
    try:
        queue = Queue(store, 2)
        job = queue.start()
        store.apply([Change(job.id, JobState.RUNNING, None, "", queue.clock.now(),
                            {"pid": unrelated.pid, "proc_token": "1"})])
        paths = StatePaths(tmp_path / "home")
        paths.ensure()
        queue.compute = LocalExecutor(paths, Inventory(gpus=gpus(2)))

        counts = queue.restart().recover()

        assert counts == {"adopted": 0, "finished": 0, "requeued": 1}
        assert queue.state(job.id) == JobState.QUEUED
        assert survives(unrelated)
    finally:
        store.close()


def test_ended_tells_an_attempt_whose_process_has_exited(executor, tmp_path):
    job = job_record(id="7", spec={"command": ["sleep", "0.3"], "workdir": str(tmp_path)})
    launched = executor.launch(job, (0,), 1)
    job = dead_job_on(launched.pid, launched.token, id="7", spec={"command": ["sleep", "0.3"]})
    assert not executor.ended(job)                 # held at its gate: it has not run
    executor.release([job.id])
    assert not executor.ended(job)
    [fd] = executor.fds()
    assert select.select([fd], [], [], 10)[0], "the attempt never ended"

    assert executor.ended(job)                     # its end not collected yet
    ended = executor.collect(fd)
    assert (ended.code, ended.signal) == (0, None)
    assert executor.ended(job)                     # collected, its status kept until the end is settled
    executor.forget(job)
    assert not executor.ended(job)
    assert not os.path.exists(executor.paths.exit_for(job.id, 1))


def test_what_an_attempt_left_in_its_group_is_killed_when_it_ends(executor, tmp_path):
    """Its wrapper is reaped as its end is collected: the group is killed first, while the
    unreaped wrapper keeps its pid (and so its group's) from being another's."""
    left = tmp_path / "left"
    command = ["sh", "-c", f"sleep 60 & echo $! > {left}"]
    job = job_record(id="7", spec={"command": command, "workdir": str(tmp_path)})
    launched = executor.launch(job, (0,), 1)
    executor.release([job.id])
    [fd] = executor.fds()
    assert select.select([fd], [], [], 10)[0], "the attempt never ended"
    assert executor.collect(fd).code == 0

    executor.cleanup(dead_job_on(launched.pid, launched.token, id="7", spec={"command": command}))

    orphan = int(left.read_text())
    deadline = time.monotonic() + 5
    while process_token(orphan) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_token(orphan) is None, "a process the job left behind outlived it"
