"""`gqa hold`, `gqa release` and `gqa update` from the real CLI against a
running daemon: a held job keeps waiting while GPUs are free, and runs, with
what an update asked, once released."""

import re
import time

import pytest

pytestmark = pytest.mark.e2e


def test_a_held_job_waits_with_gpus_free_and_runs_once_released(queue):
    [filler] = queue.submit(["sleep", "30"], resources={"gpus": 4})
    queue.wait(filler, ("RUNNING",))
    [job_id] = queue.submit(["sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES"], resources={"gpus": 2})

    held = queue.cli("hold", job_id, check=True)
    assert held.stdout == f"job {job_id} held\n"
    updated = queue.cli("update", job_id, "--gpus", "1", "--time", "10m", check=True)
    assert updated.stdout == f"job {job_id} updated (wall time none -> 10m00s, GPUs 2 -> 1)\n"
    queue.backend.control().cancel([filler])
    queue.wait(filler)
    time.sleep(1.0)                                   # several turns of the daemon's loop with 4 GPUs free
    job = queue.job(job_id)
    assert (job.state.value, job.user_hold, job.attempts) == ("HELD", True, 0)

    assert queue.cli("release", job_id, check=True).stdout == f"job {job_id} released\n"
    job = queue.wait(job_id)
    assert (job.state.value, job.wall_time) == ("SUCCEEDED", 600)
    assert re.search(r"^gpus=\d$", queue.wait_log(job_id, "gpus="), re.M)     # one GPU, as updated
    assert [t.reason for t in job.history][:4] == ["submitted", "admitted", "held by user", "released by user"]
