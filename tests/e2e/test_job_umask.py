"""A job's files get the umask Slurm gives it (022, or SLURM_UMASK where the
job sets it), not the daemon's own 077; the daemon's files stay private."""

import stat

import pytest

pytestmark = pytest.mark.e2e

WRITE = "echo data > made.txt; echo umask=$SLURM_UMASK; echo out"


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_jobs_new_files_and_its_output_are_readable_by_others_as_under_slurm(queue):
    [job_id] = queue.submit(["sh", "-c", WRITE], output="job.out")
    assert queue.wait(job_id).state.value == "SUCCEEDED", queue.log(job_id)
    assert _mode(queue.home / "made.txt") == 0o644
    assert _mode(queue.home / "job.out") == 0o644
    assert "umask=0022" in (queue.home / "job.out").read_text()
    assert _mode(queue.home / "logs" / f"{job_id}.log") == 0o600     # gqa's own log stays private


def test_a_job_that_sets_slurm_umask_gets_it(queue):
    [job_id] = queue.submit(["sh", "-c", WRITE], output="job.out", env={"SLURM_UMASK": "0027"})
    assert queue.wait(job_id).state.value == "SUCCEEDED", queue.log(job_id)
    assert _mode(queue.home / "made.txt") == 0o640
    assert _mode(queue.home / "job.out") == 0o640
    assert "umask=0027" in (queue.home / "job.out").read_text()


def test_an_output_file_already_there_keeps_its_mode(queue):
    (queue.home / "job.out").write_text("old\n")
    (queue.home / "job.out").chmod(0o600)
    [job_id] = queue.submit(["sh", "-c", WRITE], output="job.out")
    assert queue.wait(job_id).state.value == "SUCCEEDED", queue.log(job_id)
    assert _mode(queue.home / "job.out") == 0o600 and (queue.home / "job.out").read_text().endswith("out\n")
