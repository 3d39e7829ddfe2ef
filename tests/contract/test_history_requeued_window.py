"""The history contract for a requeued job on every backend: one not finished
belongs to every window from its first attempt's start on, however late its
last attempt started (the record's start is its last attempt's)."""

import time

import pytest

from gqa.ports import BETWEEN_ATTEMPTS, Change, HistoryQuery
from tests.contract.jobs import S, put

DAY = 86_400.0
# the start of a UTC day three days ago: DynamoDB's index is read a day at a time up to now
T0 = float(int(time.time() // DAY * DAY) - 3 * DAY)


def ran_again(store, state, *, first: float, later: float, attempts: int, **record):
    """A job whose first attempt ran a minute from `first` and whose next `attempts - 1` ran a
    minute each from `later` on, one an hour; it is now in `state` (RUNNING: its last attempt runs
    still; QUEUED or RETRY_WAIT: it waits to run again)."""
    job = put(store, S.RUNNING, at=first, fields={"started_at": first, "attempts": 1}, **record)
    starts = [later + 3600 * n for n in range(attempts - 1)]
    for n, start in enumerate([first, *starts], start=1):
        if n > 1:
            for step in (S.QUEUED, S.STARTING):
                [job] = store.apply([Change(job.id, job.state, step, f"moved to {step}", start - 1)])
            [job] = store.apply([Change(job.id, S.STARTING, S.RUNNING, f"attempt {n} started", start,
                                        {"started_at": start, "attempts": n})])
        if n < attempts or state != S.RUNNING:
            used = {"gpu_seconds": 60.0 * n, "cost": 0.25 * n, "not_before": start + 60}
            [job] = store.apply([Change(job.id, S.RUNNING, S.RETRY_WAIT, "reclaimed", start + 60, used)])
    if state == S.QUEUED:
        [job] = store.apply([Change(job.id, S.RETRY_WAIT, S.QUEUED, "back in the queue", job.history[-1].at + 1)])
    return job


# 12 attempts: more transitions than a DynamoDB item keeps (the older move to history items)
@pytest.mark.parametrize("attempts", [2, 12])
@pytest.mark.parametrize("state", [S.RUNNING, S.QUEUED, S.RETRY_WAIT])
def test_a_window_holds_a_job_an_earlier_attempt_of_which_ran_in_it(store, state, attempts):
    job = ran_again(store, state, first=T0 + 50, later=T0 + 2 * DAY, attempts=attempts, name="requeued")
    assert store.get(job.id).started_at >= T0 + 2 * DAY           # the record's start: its last attempt's
    never = ran_again(store, state, first=T0 + DAY + 50, later=T0 + 2 * DAY, attempts=2, name="later")
    for query in (HistoryQuery(since=T0, until=T0 + DAY),
                  HistoryQuery(since=T0, until=T0 + DAY, states=frozenset({state}) | BETWEEN_ATTEMPTS),
                  HistoryQuery(since=T0, until=T0 + DAY, waiting=True),
                  HistoryQuery(since=T0, until=T0 + DAY, limit=1)):
        jobs, _ = store.history(query)
        assert [j.id for j in jobs] == [job.id], query           # not the one first started after the window
        assert query.holds(jobs[0]) and not query.holds(store.get(never.id))
    assert [j.id for j in store.history(HistoryQuery(since=T0, until=T0 + 50))[0]] == []   # before its first start
