"""A pass's claims are one write; when one of them conflicts (its job was
cancelled between the pass's read and its write, or the store refuses that
job), the others are still claimed and launched, one by one, and the pass
does not give up its every start."""

from __future__ import annotations

import pytest

from gqa.models.errors import Conflict
from gqa.models.job import JobState
from gqa.ports import Change

S = JobState


@pytest.mark.parametrize("holds_launches", [False, True], ids=["launch-then-record", "gated"])
def test_a_job_cancelled_between_read_and_claim_does_not_stop_the_others(queue, holds_launches):
    queue.compute.holds_launches = holds_launches
    a, b, c = (queue.submit_one(name=n, resources={"gpus": 1}) for n in "abc")
    apply = queue.store.apply
    cancelled = []

    def cancel_b_first(changes, *args, **kwargs):
        if not cancelled and any(ch.job_id == b.id and ch.to == S.STARTING for ch in changes):
            cancelled.append(b.id)    # a cancel lands between the pass's snapshot and its claims
            apply([Change(b.id, S.QUEUED, S.CANCELLED, "cancelled by user", queue.clock.now())])
        return apply(changes, *args, **kwargs)

    queue.store.apply = cancel_b_first
    started = queue.supervisor.dispatch()
    assert sorted(j.id for j in started) == sorted([a.id, c.id])
    assert queue.get(b.id).state == S.CANCELLED
    if holds_launches:   # all three were launched held at their gates; only the claimed two are let run
        assert sorted(queue.compute.released) == sorted([a.id, c.id]) and b.id not in queue.compute.released
    else:
        assert sorted(launch.job_id for launch in queue.compute.launches) == sorted([a.id, c.id])


def test_a_job_the_store_refuses_every_time_is_left_and_the_others_start(queue):
    a, b = (queue.submit_one(name=n, resources={"gpus": 1}) for n in "ab")
    apply = queue.store.apply

    def refuse_b(changes, *args, **kwargs):
        if any(ch.job_id == b.id for ch in changes):
            raise Conflict(f"job {b.id}: the store refused the write")
        return apply(changes, *args, **kwargs)

    queue.store.apply = refuse_b
    assert [j.id for j in queue.supervisor.dispatch()] == [a.id]
    assert queue.get(b.id).state == S.QUEUED
