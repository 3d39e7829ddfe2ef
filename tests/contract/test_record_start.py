"""The JobStore contract for record_start: an attempt's start written in one
guarded step, applied once, only to the attempt and Batch job the job is
STARTING on; anything else is refused with None and changes nothing."""

import pytest

from gqa.models.errors import Conflict
from gqa.models.job import JobState, Request, Transition
from gqa.ports import Change
from tests.contract.jobs import T0, put
from tests.contract.test_long_history import requeue_loop

S = JobState
AT = T0 + 50
REASON = "attempt 2 started"


def launched(store, **fields):
    """A job STARTING on attempt 2 as Batch job "batch-2", with what attempt 1 left behind."""
    return put(store, S.STARTING, fields={"attempts": 2, "proc_token": "batch-2", "exit_code": 1, "signal": 9,
                                          "assigned": (0,), **fields})


def test_a_start_is_recorded_once(store, open_store):
    job = launched(store)

    started = store.record_start(job.id, 2, "batch-2", AT, REASON)

    assert started is not None
    assert (started.state, started.started_at, started.reason) == (S.RUNNING, AT, REASON)
    assert (started.exit_code, started.signal) == (None, None)
    assert (started.attempts, started.proc_token, started.assigned) == (2, "batch-2", (0,))
    assert started.history == job.history + (Transition(S.RUNNING, AT, REASON),)
    stored = open_store().get(job.id)   # another process's view
    assert stored == started
    assert store.record_start(job.id, 2, "batch-2", AT, REASON) is None    # the same event again
    assert open_store().get(job.id) == stored


def _moved(store, job):
    [job] = store.apply([Change(job.id, S.STARTING, S.RETRY_WAIT, "interrupted", T0 + 5)])
    return job


def _cancelled(store, job):
    [job] = store.apply([Change(job.id, S.STARTING, S.CANCELLED, "cancelled", T0 + 5)])
    return job


def _running(store, job):
    [job] = store.apply([Change(job.id, S.STARTING, S.RUNNING, "attempt 2 started", T0 + 5, {"started_at": T0 + 5})])
    return job


def _not_recorded(store, job):
    [job] = store.apply([Change(job.id, S.STARTING, None, "", T0, {"attempts": 1, "proc_token": None})])
    return job


# (what happened first, the start asked for: attempt, token, job id ("" = the job's own))
REFUSED = {
    "another attempt": (None, 1, "batch-2", ""),
    "a later attempt": (None, 3, "batch-2", ""),
    "another Batch job": (None, 2, "batch-9", ""),
    "a launch not recorded": (_not_recorded, 2, "batch-2", ""),
    "already running": (_running, 2, "batch-2", ""),
    "moved on": (_moved, 2, "batch-2", ""),
    "ended": (_cancelled, 2, "batch-2", ""),
    "an unknown job": (None, 2, "batch-2", "999"),
    "an id the store never makes": (None, 2, "batch-2", "no such id"),
}


@pytest.mark.parametrize("before, attempt, token, job_id", REFUSED.values(), ids=REFUSED.keys())
def test_a_start_that_does_not_hold_is_refused_and_changes_nothing(store, open_store, before, attempt, token,
                                                                   job_id):
    job = launched(store)
    if before is not None:
        job = before(store, job)
    as_it_was = open_store().get(job.id)

    assert store.record_start(job_id or job.id, attempt, token, AT, REASON) is None

    assert open_store().get(job.id) == as_it_was


def test_a_write_planned_before_the_start_cannot_undo_it(store, open_store):
    job = launched(store)
    other = open_store()
    other.get(job.id)          # the other process read it STARTING

    store.record_start(job.id, 2, "batch-2", AT, REASON)

    with pytest.raises(Conflict):   # planned on STARTING: refused, not written over the start
        other.apply([Change(job.id, S.STARTING, None, "", AT + 1, {"request": Request.CANCEL})])
    [ended] = other.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "exit code 0", AT + 100, {"ended_at": AT + 100})])
    assert [h.state for h in open_store().get(job.id).history][-3:] == [S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert ended.started_at == AT and ended.request is None


# requeue loops of 4 transitions before the start: 39, 103 and 155 transitions in all when it comes
# (on DynamoDB the item then holds 39, history.MOST and 29 of them: applied, refused, applied)
@pytest.mark.parametrize("steps", [36, 100, 152])
def test_a_long_history_keeps_every_transition_whoever_records_the_start(store, open_store, steps):
    """Past what a backend keeps in one record, record_start may refuse and
    leave the start to apply() (as the reconcile service does): either way the
    start is recorded once and the whole history is there, in order."""
    job = requeue_loop(store, put(store, S.QUEUED), steps, 2)
    assert job.state == S.QUEUED
    [job] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0 + steps + 2,
                                {"attempts": 7, "proc_token": "batch-7"})])
    before = [(h.state, h.reason) for h in open_store().get(job.id).history]

    started = store.record_start(job.id, 7, "batch-7", AT + 1000, "attempt 7 started")
    if started is None:
        [started] = store.apply([Change(job.id, S.STARTING, S.RUNNING, "attempt 7 started", AT + 1000,
                                        {"started_at": AT + 1000, "exit_code": None, "signal": None})])

    whole = open_store().get(job.id)
    assert [(h.state, h.reason) for h in whole.history] == before + [(S.RUNNING, "attempt 7 started")]
    assert started.history == whole.history[-len(started.history):]
    assert (whole.state, whole.started_at) == (S.RUNNING, AT + 1000)
    assert store.record_start(job.id, 7, "batch-7", AT + 1000, "attempt 7 started") is None
