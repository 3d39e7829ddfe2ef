"""A RUNNING event is one guarded write (JobStore.record_start) when it is
the expected one, the start of the attempt the job is STARTING on; every
other RUNNING event falls back to reading the job and judging the event, so
duplicates, late, foreign and early events keep their rules. A start wakes
no scheduling pass: it frees no GPUs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gqa.models.job import JobState
from gqa.ports import Change
from gqa.services.reconcile import Action, ReconcileService
from tests.services.conftest import T0
from tests.services.fakes import CountingWaker
from tests.services.test_reconcile import START, event, launched

S = JobState
A = Action


class Watched:
    """The store, counting the service's reads and starts; `blind` False makes
    record_start refuse every write, as a store that must read first would."""

    def __init__(self, store, blind: bool = True):
        self.store, self.blind = store, blind
        self.gets = self.starts = 0

    def get(self, job_id):
        self.gets += 1
        return self.store.get(job_id)

    def record_start(self, *args):
        self.starts += 1
        return self.store.record_start(*args) if self.blind else None

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_the_expected_start_is_one_write_and_no_read(queue):
    job = launched(queue)
    store, waker = Watched(queue.store), CountingWaker()

    result = ReconcileService(store, queue.rng, waker).handle(event(job, "RUNNING", at=START + 5))

    assert (result.action, result.reason) == (A.RUNNING, "attempt 1 started")
    assert (store.starts, store.gets, waker.wakes) == (1, 0, 0)
    stored = queue.get(job.id)
    assert result.job == stored
    assert (stored.state, stored.started_at, stored.reason) == (S.RUNNING, START, "attempt 1 started")
    assert [(t.state, t.at) for t in stored.history][-2:] == [(S.STARTING, T0), (S.RUNNING, START)]


def _running(queue, job):
    queue.store.apply([Change(job.id, S.STARTING, S.RUNNING, "attempt 1 started", START, {"started_at": START})])


def _cancelled(queue, job):
    queue.store.apply([Change(job.id, S.STARTING, S.CANCELLED, "cancelled", T0 + 1, {"ended_at": T0 + 1})])


def _not_recorded(queue, job):
    queue.store.apply([Change(job.id, S.STARTING, None, "", T0, {"attempts": 0, "proc_token": None})])


# (what happened to the launched job first, the event's changes, the action, the job's state after)
FALLBACKS = {
    "duplicate": (_running, {}, A.IGNORED, S.RUNNING),
    "late start on an old record": (_running, {"started_at": START + 600}, A.RUNNING, S.RUNNING),
    "after the job was cancelled": (_cancelled, {}, A.IGNORED, S.CANCELLED),
    "of an earlier attempt": (None, {"attempt": 0}, A.IGNORED, S.STARTING),
    "of another Batch job": (None, {"batch_job_id": "batch-other"}, A.IGNORED, S.STARTING),
    "before the launch was recorded": (_not_recorded, {"attempt": 1, "batch_job_id": "batch-early"}, A.RUNNING,
                                       S.RUNNING),
}


@pytest.mark.parametrize("before, changes, action, state", FALLBACKS.values(), ids=FALLBACKS.keys())
def test_any_other_start_is_read_and_judged(queue, before, changes, action, state):
    job = launched(queue)
    if before is not None:
        before(queue, job)
    store = Watched(queue.store)

    result = ReconcileService(store, queue.rng).handle(replace(event(job, "RUNNING", at=START), **changes))

    assert (result.action, queue.get(job.id).state) == (action, state)
    assert (store.starts, store.gets) == (1, 1)


@pytest.mark.parametrize("names", [["RUNNING", "SUCCEEDED"], ["RUNNING", "RUNNING", "FAILED"], ["FAILED", "RUNNING"]])
def test_a_store_that_refuses_blind_starts_gives_the_same_outcome(queue, names):
    ends = {"SUCCEEDED": dict(code=0), "FAILED": dict(code=1)}
    outcomes = []
    for blind in (True, False):
        job = launched(queue)
        service = ReconcileService(Watched(queue.store, blind), queue.rng)
        actions = [service.handle(event(job, n, at=START if n == "RUNNING" else START + 100, **ends.get(n, {}))).action
                   for n in names]
        done = queue.get(job.id)
        outcomes.append((actions, done.state, [t.state for t in done.history], done.started_at, done.gpu_seconds))
    assert outcomes[0] == outcomes[1]
