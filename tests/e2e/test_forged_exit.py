"""An attempt's exit record is its user's to write on a shared box (the
wrapper runs as them and writes the status there), so what the record says
is taken only once the attempt's process is gone as the daemon itself tells:
a job that writes an end into its record while it runs is still stopped and
cancelled, the daemon's stop still stops it, and an end the record dates
before the daemon last saw the process running is charged from then."""

from __future__ import annotations

import os
import select
import signal
import time

import pytest

from cli.local import stop_daemon
from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.processes import process_token, read_exit
from gqa.adapters.local.store import SqliteStore
from gqa.models.job import JobState
from gqa.models.records import with_changes
from gqa.ports import Inventory
from tests.builders import gpus, job_record
from tests.e2e.conftest import next_end
from tests.services.conftest import Queue

pytestmark = pytest.mark.e2e

FORGED_AT = 1_000.0   # an end in 1970, long before any job here started


def forging(mark, pid_file=None) -> list[str]:
    """A job that writes "ended 0, at FORGED_AT" into its own exit record, says so in `mark`
    and runs on (its process's pid in `pid_file`)."""
    record = '"$GQA_HOME_EXITS/$GQA_JOB_ID.$GQA_ATTEMPT"'
    keep = f"echo $$ > {pid_file}; " if pid_file else ""
    return ["sh", "-c", f'printf "0  \\n" 1<> {record}; touch -d @{FORGED_AT:.0f} {record}; '
                        f": > {mark}; {keep}exec sleep 60"]


@pytest.fixture
def paths(tmp_path):
    made = StatePaths(tmp_path / "home")
    made.ensure()
    return made


@pytest.fixture
def launched():
    """The process groups of the jobs a test launched: killed after it, whatever it found."""
    groups: list[int] = []
    yield groups
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def executor_for(paths) -> LocalExecutor:
    return LocalExecutor(paths, Inventory(gpus=gpus(1)), base_env=dict(os.environ, GQA_HOME_EXITS=str(paths.exits)))


def wait_for(path, timeout=10.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def collected(executor, timeout=10.0):
    return next_end(executor, timeout)


def launched_forger(executor, tmp_path, groups, job_id="7"):
    """The forging job launched, released and past its forgery, as its recorded RUNNING self."""
    mark = tmp_path / f"forged-{job_id}"
    job = job_record(id=job_id, spec={"command": forging(mark), "workdir": str(tmp_path)})
    launched = executor.launch(job, (0,), 1)
    groups.append(launched.pid)
    executor.release([job.id])
    wait_for(mark)
    assert read_exit(executor.paths.exit_for(job_id, 1)) == (0, FORGED_AT)   # the record says it ended
    return with_changes(job, state=JobState.RUNNING, attempts=1, pid=launched.pid, proc_token=launched.token,
                        started_at=time.time())


def test_a_status_the_job_writes_into_its_record_while_it_runs_ends_nothing(paths, tmp_path, launched):
    executor = executor_for(paths)
    job = launched_forger(executor, tmp_path, launched)

    asked = time.time()
    assert not executor.ended(job)          # its process runs: nothing has ended, a stop must reach it
    executor.terminate(job, grace=5.0)
    out = collected(executor)

    assert out.code == 128 + 15             # stopped by the SIGTERM, as the wrapper saw it end
    assert out.ended_at is not None and out.ended_at >= asked   # not the record's 1970
    assert process_token(job.pid) is None


def test_a_restarted_daemon_stops_a_job_whose_record_says_it_ended(paths, tmp_path, launched):
    first = executor_for(paths)
    job = launched_forger(first, tmp_path, launched)
    restarted = executor_for(paths)          # a new daemon: the first one's memory of the attempt is gone

    assert not restarted.ended(job)          # not watched yet: its recorded process still runs
    restarted.adopt(job)
    assert not restarted.ended(job)
    restarted.terminate(job, grace=5.0)
    out = collected(restarted)

    assert out.code == 128 + 15 and out.ended_at is not None and out.ended_at > FORGED_AT
    collected(first)                         # the first daemon's child, reaped
    assert restarted.ended(job)              # gone, its end kept until it is settled
    restarted.forget(job)
    assert not restarted.ended(job)


def test_an_end_dated_before_the_daemon_last_saw_the_job_running_is_charged_from_then(tmp_path):
    store = SqliteStore(tmp_path / "gqa.db")
    try:
        queue = Queue(store, 1)
        paths = StatePaths(tmp_path / "home")
        paths.ensure()
        executor = queue.compute = executor_for(paths)
        supervisor = queue.restart()
        queue.clock.t = time.time()
        job = queue.start(command=["sleep", "1"], workdir=str(tmp_path))
        time.sleep(0.5)
        seen = time.time()
        executor.kill_overdue()              # a turn of the daemon's loop: the job is seen running
        [fd] = executor.fds()
        assert select.select([fd], [], [], 10)[0], "the attempt never ended"
        # ended, not collected yet: its user dates its end just after its start
        os.utime(paths.exit_for(job.id, 1), (job.started_at + 0.01, job.started_at + 0.01))
        out = executor.collect(fd)
        queue.clock.t = time.time()
        [settled] = supervisor.on_exits([out])

        assert settled.state == JobState.SUCCEEDED
        assert out.ended_at is not None and seen <= out.ended_at <= queue.clock.t
        assert settled.gpu_seconds >= (seen - job.started_at) * job.gpus
    finally:
        store.close()


def test_a_job_that_writes_an_end_into_its_record_is_cancelled_and_the_daemon_stops_promptly(make_queue, tmp_path):
    queue = make_queue(gpus=1, grace=2.0)
    exits = str(queue.home / "exits")
    first_mark, first_pid = tmp_path / "first", tmp_path / "first.pid"
    [first] = queue.submit(forging(first_mark, first_pid), env={"GQA_HOME_EXITS": exits})
    [behind] = queue.submit(forging(tmp_path / "behind", tmp_path / "behind.pid"), env={"GQA_HOME_EXITS": exits})
    wait_for(first_mark, timeout=20)
    wait_for(first_pid)

    queue.backend.control().cancel([first])

    assert queue.wait(first, timeout=10).state == JobState.CANCELLED
    assert process_token(int(first_pid.read_text())) is None
    wait_for(tmp_path / "behind", timeout=20)     # the GPU it held went to the job behind it, which forges too
    wait_for(tmp_path / "behind.pid")
    began = time.monotonic()
    assert stop_daemon(StatePaths(queue.home), timeout=20)
    assert time.monotonic() - began < 10
    assert process_token(int((tmp_path / "behind.pid").read_text())) is None


def test_a_record_its_user_has_grown_is_read_by_its_first_line(tmp_path):
    """The daemon reads it as root: a few bytes of it, never all a user made of it."""
    record = tmp_path / "7.1"
    record.write_bytes(b"3  \n0  \n")
    os.truncate(record, 64 << 20)   # sparse: no disk taken

    assert read_exit(record)[0] == 3
