"""An attempt's exit is recorded on disk even when the job filled the disk:
the wrapper writes its status over bytes reserved at launch. The daemon's
own record of the end may fail on a full disk and is lost if it is then
stopped or killed; the status file is what a restarted daemon settles the
attempt by, so a job that succeeded is not taken for lost and run again.

The reservation is tested everywhere (the file is there, its bytes reserved,
before the job may run, and the status lands in that same file); the whole
case on a real full disk where a 1 MiB tmpfs can be mounted (root)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.processes import STATUS_ROOM, read_exit
from gqa.models.records import with_changes
from gqa.ports import Inventory
from tests.builders import gpus, job_record
from tests.e2e.conftest import next_end

pytestmark = pytest.mark.e2e


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("needs to mount a 1 MiB tmpfs (root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def ended(executor, job):
    executor.launch(job, (0,), 1)
    executor.release([job.id])
    return next_end(executor)


def test_the_exit_status_is_written_over_bytes_reserved_before_the_job_may_run(tmp_path):
    paths = StatePaths(tmp_path / "home")
    paths.ensure()
    executor = LocalExecutor(paths, Inventory(gpus=gpus(1)))
    job = job_record(id="7", group="7", spec={"command": ["sh", "-c", "exit 4"], "workdir": str(tmp_path)})
    executor.launch(job, (0,), 1)
    reserved = paths.exit_for("7", 1)
    # launched, held at its gate: the file is made and its space taken, and it reads as no status yet
    assert reserved.read_bytes() == STATUS_ROOM and read_exit(reserved) == (None, None)
    inode = os.stat(reserved).st_ino
    executor.release(["7"])
    out = next_end(executor)
    assert out.code == 4 and read_exit(reserved)[0] == 4
    assert os.stat(reserved).st_ino == inode and reserved.stat().st_size == len(STATUS_ROOM)   # in place


@pytest.mark.parametrize("code", [0, 3])
def test_a_job_that_fills_the_disk_has_its_exit_status_and_time_on_disk(small_disk, tmp_path, code):
    paths = StatePaths(small_disk / "home")
    paths.ensure()
    executor = LocalExecutor(paths, Inventory(gpus=gpus(1)))
    fill = f"head -c 2000000 /dev/zero > {small_disk}/filler 2>/dev/null; sleep 0.2; exit {code}"
    job = job_record(id="7", group="7", spec={"command": ["sh", "-c", fill], "workdir": str(tmp_path)})
    started = time.time()
    out = ended(executor, job)
    assert out.code == code
    # what a daemon restarted after a crash reads (its memory of the exit is gone)
    status, at = read_exit(paths.exit_for("7", 1))
    assert status == code and at is not None and started < at <= time.time()
    assert executor.reap(with_changes(job, attempts=1)).code == code
