"""A batch script is run as it was when submitted, as sbatch's copy is: an
edit or a removal after `gqa submit` changes no queued job, and every attempt
(a requeue too) runs the same copy from the submitter's directory."""

import os
import re

import pytest

pytestmark = pytest.mark.e2e

SCRIPT = """#!/bin/sh
#SBATCH --gpus=1
echo "lr={lr} cwd=$(pwd) submit=$SLURM_SUBMIT_DIR attempt=$GQA_ATTEMPT arg=$1"
{tail}
"""


def _write(path, lr, tail="", executable=False):
    path.write_text(SCRIPT.format(lr=lr, tail=tail))
    path.chmod(0o755 if executable else 0o644)


def _submit(queue, *args) -> str:
    return queue.cli("submit", *args, check=True).stdout.strip()


@pytest.mark.parametrize("executable", [True, False])
def test_each_job_runs_the_script_it_was_submitted_with(queue, executable):
    [filler] = queue.submit(["sleep", "30"], resources={"gpus": 4})
    queue.wait(filler, ("RUNNING",))
    script = queue.home / "train.sh"
    _write(script, "0.1", executable=executable)
    first = _submit(queue, "train.sh", "--", "a")
    _write(script, "0.01", executable=executable)
    second = _submit(queue, "train.sh", "--", "b")
    script.unlink()
    third_script = queue.home / "tmp.sh"
    _write(third_script, "0.5", executable=executable)
    third = _submit(queue, "tmp.sh")
    third_script.unlink()                        # sbatch tmp.sh && rm tmp.sh
    queue.backend.control().cancel([filler])

    jobs = queue.wait([first, second, third])
    assert [j.state.value for j in jobs] == ["SUCCEEDED"] * 3, [j.reason for j in jobs]
    here = str(queue.home)
    assert f"lr=0.1 cwd={here} submit={here} attempt=1 arg=a\n" in queue.log(first)
    assert f"lr=0.01 cwd={here} submit={here} attempt=1 arg=b\n" in queue.log(second)
    assert f"lr=0.5 cwd={here} submit={here} attempt=1 arg=\n" in queue.log(third)
    assert not list((queue.home / "exits").glob("*.d"))     # each attempt's copy goes with it


def test_a_requeued_job_runs_the_copy_it_was_submitted_with(queue):
    script = queue.home / "train.sh"
    _write(script, "0.1", tail='echo "zero=$0"; [ "$GQA_ATTEMPT" = 1 ] && exec sleep 30; exit 0')
    job_id = _submit(queue, "train.sh")
    log = queue.wait_log(job_id, "lr=0.1")
    copy = re.search(r"zero=(\S+)", log).group(1)
    assert copy != str(script) and oct(os.stat(copy).st_mode & 0o777) == "0o700"
    _write(script, "0.01")
    queue.cli("requeue", job_id, check=True)
    job = queue.wait(job_id)
    assert (job.state.value, job.attempts) == ("SUCCEEDED", 2), job.reason
    log = queue.log(job_id)
    assert "attempt=2" in log and "lr=0.01" not in log and log.count("lr=0.1 ") == 2
