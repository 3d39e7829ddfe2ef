"""The guarded-change algorithm both stores share (adapters/guarded.py), on a
backend made of its primitives alone: what it reads, how its writes lose."""

from __future__ import annotations

from typing import Any

import pytest

from gqa.adapters.guarded import GuardedChanges, Step, plan
from gqa.models.errors import Conflict, NotFound
from gqa.models.job import JobRecord, JobState
from gqa.ports import Change, apply_all_else_each
from tests.builders import job_record

S = JobState


class Backend(GuardedChanges):
    """Jobs in a dict; `lose` writes lose their race (another writer got there first)."""

    def __init__(self, jobs: list[JobRecord], *, retries: int = 0, remembers: bool = False, lose: int = 0,
                 remembered: dict[str, JobRecord] | None = None):
        self.jobs = {j.id: j for j in jobs}
        self.conflict_retries = retries
        self.remembers = remembers
        self.lose = lose
        self.remembered = remembered or {}
        self.reads: list[tuple[list[str], bool]] = []
        self.writes = 0

    def _read(self, job_ids: list[str], remembered: bool) -> tuple[dict[str, JobRecord], Any]:
        self.reads.append((job_ids, remembered))
        source = {**self.jobs, **self.remembered} if remembered else self.jobs
        return {i: source[i] for i in job_ids if i in source}, None

    def _write(self, steps: list[Step], read: Any, prepared: Any) -> set[str]:
        self.writes += 1
        if self.lose:
            self.lose -= 1
            return set()
        for step in steps:
            self.jobs[step.after.id] = step.after
        return {s.change.job_id for s in steps}


def jobs(*states: JobState) -> list[JobRecord]:
    return [job_record(id=str(n), group=str(n), state=s) for n, s in enumerate(states, start=1)]


def test_a_batch_is_applied_in_order_and_a_job_changed_twice_chains():
    store = Backend(jobs(S.QUEUED, S.QUEUED))
    out = store.apply([Change("1", S.QUEUED, S.STARTING, "claimed", 10.0),
                       Change("1", S.STARTING, S.RUNNING, "started", 11.0),
                       Change("2", S.QUEUED, S.HELD, "held", 12.0)])
    assert [j.state for j in out] == [S.STARTING, S.RUNNING, S.HELD]
    assert store.jobs["1"].state == S.RUNNING and store.writes == 1


def test_a_stale_expectation_is_conflict_and_nothing_is_written():
    store = Backend(jobs(S.QUEUED, S.RUNNING))
    with pytest.raises(Conflict, match="job 2 is RUNNING, expected QUEUED"):
        store.apply([Change("1", S.QUEUED, S.HELD, "", 1.0), Change("2", S.QUEUED, S.HELD, "", 1.0)])
    assert store.writes == 0 and store.jobs["1"].state == S.QUEUED


def test_a_missing_job_is_not_found():
    with pytest.raises(NotFound, match="no job 9"):
        plan({}, [(0, Change("9", S.QUEUED, S.HELD, "", 1.0))])


def test_a_lost_write_is_planned_again_from_a_fresh_read_up_to_the_retries():
    store = Backend(jobs(S.QUEUED), retries=2, lose=2)
    [job] = store.apply([Change("1", S.QUEUED, S.HELD, "", 1.0)])
    assert job.state == S.HELD and store.writes == 3
    with pytest.raises(Conflict, match="kept changing"):
        Backend(jobs(S.QUEUED), retries=2, lose=3).apply([Change("1", S.QUEUED, S.HELD, "", 1.0)])


def test_a_change_judged_stale_on_remembered_jobs_is_judged_again_on_a_fresh_read():
    stale = {"1": job_record(id="1", group="1", state=S.STARTING)}
    store = Backend(jobs(S.QUEUED), retries=1, remembers=True, remembered=stale)
    [job] = store.apply([Change("1", S.QUEUED, S.HELD, "", 1.0)])
    assert job.state == S.HELD
    assert [r for _, r in store.reads] == [True, False]


def test_a_backend_that_remembers_nothing_reports_the_stale_state_at_once():
    store = Backend(jobs(S.RUNNING), retries=5)
    with pytest.raises(Conflict, match="is RUNNING"):
        store.apply([Change("1", S.QUEUED, S.HELD, "", 1.0)])
    assert len(store.reads) == 1


def test_apply_each_skips_what_no_longer_holds_and_applies_the_rest():
    store = Backend(jobs(S.QUEUED, S.CANCELLED, S.QUEUED))
    store.each_chunk = 2
    changes = [Change(str(n), S.QUEUED, S.HELD, "", 1.0) for n in (1, 2, 3, 4)]
    assert store.apply_each(changes) == [True, False, True, False]
    assert [store.jobs[i].state for i in "123"] == [S.HELD, S.CANCELLED, S.HELD]


def test_apply_all_else_each_tries_the_whole_batch_first():
    calls: list[int] = []

    def apply(changes: list[Change]) -> list[str]:
        calls.append(len(changes))
        if any(c.job_id == "bad" for c in changes):
            raise Conflict("moved")
        return [c.job_id for c in changes]

    good = [Change(i, S.QUEUED, S.HELD, "", 1.0) for i in ("a", "b")]
    assert apply_all_else_each(apply, good) == ["a", "b"] and calls == [2]
    calls.clear()
    mixed = good[:1] + [Change("bad", S.QUEUED, S.HELD, "", 1.0)] + good[1:]
    assert apply_all_else_each(apply, mixed) == ["a", None, "b"] and calls == [3, 1, 1, 1]
    with pytest.raises(NotFound):
        apply_all_else_each(lambda c: (_ for _ in ()).throw(NotFound("gone")), good)
