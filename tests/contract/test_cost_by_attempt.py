"""`gqa cost` over every backend's history: a job's GPU-hours and money count
in the month each of its attempts ended, as the ledger charges them, whatever
state the job is in now (requeued and waiting, running again, finished
later), so a team's GPU-hours and its jobs' money agree with its spend."""

import time

import pytest

from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu
from gqa.scheduling.budget import period_of
from gqa.services.cost import CostService, period_bounds
from tests.contract.jobs import S, put
from tests.services.fakes import FakeClock

PRICE = 2.0      # per GPU-hour
HOUR = 3600.0
NOW = time.time()
THIS_MONTH = period_of(NOW)
MONTH_START = period_bounds(THIS_MONTH)[0]
LAST_MONTH = period_of(MONTH_START - 1)


def requeued_after_an_hour(store, state):
    """A 2-GPU job whose first attempt ran an hour last month (2 GPU-hours, $4) and was reclaimed;
    now it waits to retry, is back in the queue, runs again since the month began, or ran again
    30 minutes this month and succeeded (1 GPU-hour, $2)."""
    first = MONTH_START - 3 * 86_400
    job = put(store, S.RUNNING, at=first, fields={"started_at": first, "attempts": 1, "assigned": (0, 1)},
              team="vision", gpus=2)
    [job] = store.apply([Change(job.id, S.RUNNING, S.RETRY_WAIT, "reclaimed", first + HOUR,
                                {"gpu_seconds": 2 * HOUR, "cost": 4.0, "not_before": first + HOUR},
                                usage=2 * HOUR, cost=4.0)])
    if state == S.RETRY_WAIT:
        return job
    again = MONTH_START + 10
    [job] = store.apply([Change(job.id, S.RETRY_WAIT, S.QUEUED, "back in the queue", again - 5)])
    if state == S.QUEUED:
        return job
    [job] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0,1", again - 1, {"assigned": (0, 1)})])
    [job] = store.apply([Change(job.id, S.STARTING, S.RUNNING, "attempt 2 started", again,
                                {"started_at": again, "attempts": 2})])
    if state == S.SUCCEEDED:
        [job] = store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "exit code 0", again + HOUR / 2,
                                    {"ended_at": again + HOUR / 2, "gpu_seconds": 3 * HOUR, "cost": 6.0},
                                    usage=HOUR, cost=2.0)])
    return job


# the month the first attempt ended in, and this one: (GPU-hours, money) of the team and of the job
EXPECTED = {
    S.RETRY_WAIT: {LAST_MONTH: (2.0, 4.0), THIS_MONTH: (0.0, 0.0)},
    S.QUEUED: {LAST_MONTH: (2.0, 4.0), THIS_MONTH: (0.0, 0.0)},
    S.RUNNING: {LAST_MONTH: (2.0, 4.0), THIS_MONTH: (1.0, 2.0)},     # running 30 min so far on 2 GPUs
    S.SUCCEEDED: {LAST_MONTH: (2.0, 4.0), THIS_MONTH: (1.0, 2.0)},
}


@pytest.mark.parametrize("state", list(EXPECTED))
def test_each_attempt_counts_in_the_month_it_ended_whatever_the_job_is_now(store, state):
    store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(2))))
    job = requeued_after_an_hour(store, state)
    cost = CostService(store, FakeClock(MONTH_START + 10 + HOUR / 2), history=store)
    for period, (hours, money) in EXPECTED[state].items():
        report = cost.report(period=period, gpu_hours=True, jobs=5)
        assert report.gpu_hours == ({"vision": pytest.approx(hours)} if money else {}), period   # none: not listed
        assert report.total == pytest.approx(money), period                   # the ledger's, and so far
        listed = [(j.id, round(j.gpu_hours, 6), round(j.cost, 6)) for j in report.jobs]
        assert listed == ([(job.id, hours, money)] if hours else []), period
