"""A Slurm job's files on a shared box, where the daemon (root) runs each job
as its owner (root only: the test plays gqa-chaos-bob): --output is created
as bob, a path bob may not write is refused at the launch even though root
could write it, and srun's record and step counter are bob's to write."""

import os
import pwd
import stat
import time
from pathlib import Path

import pytest

from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.paths import StatePaths
from gqa.models.errors import LaunchFailed
from gqa.ports import Inventory
from tests.builders import gpus, job_record
from tests.chaos.test_other_user import BOB, bob, shared_dir  # noqa: F401 (fixtures)
from tests.e2e.test_slurm_attempts import run
from tests.fifos import fifo_opened_late

pytestmark = [pytest.mark.chaos, pytest.mark.e2e,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a job as another user")]


def counting_srun(directory: Path, python: str) -> Path:
    """An srun that numbers its steps with a counter beside $GQA_STEP_STATUS, as gqa's does."""
    directory.mkdir(parents=True, exist_ok=True)
    srun = directory / "srun"
    srun.write_text('#!/bin/sh\nn=$(cat "$GQA_STEP_STATUS.steps" 2>/dev/null || echo 0)\n'
                    'echo $((n + 1)) > "$GQA_STEP_STATUS.steps" || exit 99\n'
                    '"$@"; rc=$?\n[ "$rc" = 0 ] || echo "$rc step $n: $*" >> "$GQA_STEP_STATUS"\nexit "$rc"\n')
    srun.chmod(0o755)
    return directory


@pytest.fixture
def box(shared_dir, bob):  # noqa: F811
    home = shared_dir / "home"
    home.mkdir()
    os.chmod(home, 0o711)
    paths = StatePaths(home)
    paths.ensure()
    work = shared_dir / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    executor = LocalExecutor(paths, Inventory(gpus=gpus(1)), as_owner=True, slurm_installer=counting_srun,
                             base_env={"PATH": "/usr/bin:/bin"})
    return executor, work


def bobs_job(work: Path, script: str, **spec):
    return job_record(id="5", group="5", spec={"command": ["sh", "-c", script], "workdir": str(work), "owner": BOB,
                                               **spec})


def test_bobs_output_is_his_and_his_steps_are_counted(box):
    executor, work = box
    job = bobs_job(work, "echo $SLURM_JOB_USER; srun true; srun sh -c 'exit 4'; exit 0", output="%x-%j.out")
    ended = run(executor, job)
    out = work / "train-5.out"
    assert out.read_text() == f"{BOB}\n" and out.stat().st_uid == pwd.getpwnam(BOB).pw_uid
    assert (ended.code, ended.detail) == (4, "srun step 1 (sh -c exit 4) failed with exit code 4")
    assert stat.S_IMODE((executor.paths.home / "slurm-bin").stat().st_mode) == 0o755


@pytest.mark.parametrize("output", ["/etc/gqa-chaos-bob.out", "private/out.txt"])
def test_a_file_root_could_write_and_bob_may_not_is_refused(box, output):
    executor, work = box
    (work / "private").mkdir(mode=0o755)       # root's
    with pytest.raises(LaunchFailed, match="cannot open its output, error or input file: .*(Permission denied)"):
        executor.launch(bobs_job(work, "echo hi", output=output), (0,), 1)
    assert not Path("/etc/gqa-chaos-bob.out").exists() and not (work / "private" / "out.txt").exists()


@pytest.mark.parametrize("stream", ["input", "output"])
def test_a_fifo_bob_names_for_a_stream_is_refused_at_once(box, stream):
    """Opened as bob, a FIFO would hold the daemon until something opened its other end (30 s a launch)."""
    executor, work = box
    with fifo_opened_late(work / "pf", "data\n"):
        os.chown(work / "pf", pwd.getpwnam(BOB).pw_uid, -1)
        started = time.monotonic()
        with pytest.raises(LaunchFailed, match=f"cannot open its output, error or input file: {work}/pf is a FIFO"):
            executor.launch(bobs_job(work, "echo hi", **{stream: "pf"}), (0,), 1)
        assert time.monotonic() - started < 1.0
