"""An attempt started with a wall time backfill granted (--time-min) ends by
that one: its deadline, and the end time Slurm's variables give the job."""

import pytest

from gqa.models.outcome import TIMEOUT, attempt_deadline
from gqa.models.slurm_env import slurm_env
from tests.builders import job_record


@pytest.mark.parametrize("time_limit, end", [(None, 1000 + 3600), (600.0, 1000 + 600)])
def test_the_attempt_ends_by_its_granted_wall_time(time_limit, end):
    job = job_record(spec={"limits": {"wall_time": "1h", "time_min": "5m"}}, wall_time=3600, time_limit=time_limit,
                     started_at=1000.0)
    assert job.attempt_wall_time == end - 1000
    assert attempt_deadline(job) == (end, TIMEOUT)
    assert slurm_env(job, 1, started_at=1000.0)["SLURM_JOB_END_TIME"] == str(end)
