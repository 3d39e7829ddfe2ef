"""The executor's gate with real processes: an attempt runs its command only
once the daemon opens its gate (after the launch is recorded). Abandoned, or
orphaned by a daemon that died first, it exits without running anything."""

import os
import signal
import time

import pytest

from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.processes import NEVER_RAN, read_exit
from gqa.adapters.local.paths import StatePaths
from gqa.ports import Inventory
from tests.builders import gpus, job_record

pytestmark = pytest.mark.e2e


@pytest.fixture
def executor(tmp_path):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    return LocalExecutor(paths, Inventory(gpus=gpus(2)))


def job_that_touches(path, tmp_path, job_id="7"):
    return job_record(id=job_id, spec={"command": ["sh", "-c", f"echo ran > {path}"], "workdir": str(tmp_path)})


def wait_exit(executor, launched_pid, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for fd in executor.fds():
            ended = _collect_if_done(executor, fd, launched_pid)
            if ended is not False:
                return ended
        time.sleep(0.02)
    raise AssertionError("the attempt never ended")


def _collect_if_done(executor, fd, pid):
    import select

    if select.select([fd], [], [], 0)[0]:
        return executor.collect(fd)
    return False


def test_a_held_attempt_runs_nothing_until_released(executor, tmp_path):
    marker = tmp_path / "ran"
    job = job_that_touches(marker, tmp_path)
    launched = executor.launch(job, (0,), 1)
    time.sleep(0.3)
    assert not marker.exists(), "the job ran before its launch was recorded"

    executor.release([job.id])
    ended = wait_exit(executor, launched.pid)

    assert marker.read_text() == "ran\n"
    assert (ended.code, ended.signal) == (0, None)
    code, at = read_exit(executor.paths.exit_for(job.id, 1))
    assert code == 0 and abs(at - time.time()) < 5


def test_an_abandoned_attempt_exits_without_running_and_reports_no_end(executor, tmp_path):
    marker = tmp_path / "ran"
    job = job_that_touches(marker, tmp_path)
    launched = executor.launch(job, (0,), 1)

    executor.abandon([job.id])

    assert wait_exit(executor, launched.pid) is None
    assert not marker.exists()
    assert executor.watched() == 0


def test_a_daemon_that_dies_before_releasing_leaves_an_attempt_that_never_runs(tmp_path):
    """The gate's write end lives only in the daemon: when the daemon dies the
    wrapper reads EOF and exits 125, having run nothing."""
    marker = tmp_path / "ran"
    pid_file = tmp_path / "pid"
    child = os.fork()
    if child == 0:   # the "daemon": launches, then dies with the gate closed
        try:
            paths = StatePaths(tmp_path / "home")
            paths.ensure()
            launched = LocalExecutor(paths, Inventory(gpus=gpus(1))).launch(job_that_touches(marker, tmp_path),
                                                                           (0,), 1)
            pid_file.write_text(str(launched.pid))
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(child, 0)
    wrapper = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _exists(wrapper) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)
    assert not _exists(wrapper)
    assert not marker.exists(), "an unrecorded launch ran its job"
    assert read_exit(StatePaths(tmp_path / "home").exit_for("7", 1)) == (None, None)
    assert NEVER_RAN == 125


def test_a_job_the_launcher_cannot_start_fails_with_the_reason(executor, tmp_path):
    from gqa.models.errors import LaunchFailed

    job = job_record(id="8", spec={"command": ["sh", "-c", "true"], "workdir": str(tmp_path / "missing")})
    with pytest.raises(LaunchFailed, match="does not exist"):
        executor.launch(job, (0,), 1)
    assert executor.watched() == 0
    assert not executor.paths.exit_for("8", 1).exists()


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] not in "ZX"
    except OSError:
        return False
