"""A replay's jobs as JobSummary rows, as history and reports read a real queue's."""

import pytest

from gqa.models.job import JobState
from gqa.scheduling import Policy
from gqa.sim.engine import cluster, simulate
from gqa.sim.pools import Pool, pool_gpus
from gqa.sim.summaries import job_summaries
from tests.sim.test_engine import job, work


def test_waits_run_times_and_ends_of_a_replay():
    w = work(job("a", 0, 100, gpus=2, seq=0), job("b", 10, 50, gpus=2, seq=1),
             job("c", 20, 500, wall=60, seq=2), job("huge", 30, 10, gpus=8, seq=3))
    a, b, c, huge = job_summaries(simulate(w, cluster(2), Policy()), w)
    assert (a.state, a.first_start, a.ended_at, a.wait, a.elapsed, a.gpu_hours) == (
        JobState.SUCCEEDED, 0, 100, 0, 100, 200 / 3600)
    assert (b.first_start, b.wait, b.waited) == (100, 90, (("GPUs or quota", 90.0),))
    assert (c.state, c.elapsed, c.exit_code) == (JobState.TIMED_OUT, 60, None)     # stopped at its wall time
    assert (huge.state, huge.first_start, huge.wait, huge.gpu_hours) == (JobState.QUEUED, None, None, 0)
    assert [r.tier for r in (a, b, c)] == [1, 1, 1] and a.owner == "u"


def test_cost_and_gpu_type_of_the_pool_a_job_ran_in():
    gpus, pool_of = pool_gpus([Pool("od", "a100", False, 1, 4.0), Pool("l4", "l4", False, 1, 0.5)])
    w = work(job("a", 0, 3600, seq=0), job("b", 0, 1800, seq=1))
    rows = job_summaries(simulate(w, gpus, Policy(), pool_of=pool_of), w)
    price = {"a100": 4.0, "l4": 0.5}
    assert sorted(r.gpu_type for r in rows) == ["a100", "l4"]       # one on each GPU
    for r in rows:
        assert r.gpu_hours > 0 and r.cost == pytest.approx(price[r.gpu_type] * r.gpu_hours)
