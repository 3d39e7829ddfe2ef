"""recent_events: the latest transitions across the queue, newest first, what
`gqa top` lists under "events"; asked of the port on every store. The times
are minutes before now, as a live view asks for them (DynamoDB reads
finished jobs a day's partition at a time, back to `since`)."""

import time

import pytest

from gqa.models.job import JobState
from gqa.ports import Change, JobEvent
from tests.contract.jobs import put

S = JobState


@pytest.fixture
def t0() -> float:
    return float(int(time.time()) - 600)


def test_an_empty_store_has_no_events(store, t0):
    assert store.recent_events(since=t0, limit=10) == []


def test_transitions_come_newest_first_with_the_jobs_names(store, t0):
    queued = put(store, S.QUEUED, name="prep", submitted_at=t0)
    running = put(store, S.RUNNING, name="train", at=t0 + 10, submitted_at=t0)
    store.apply([Change(queued.id, S.QUEUED, S.HELD, "held by alice", t0 + 20)])
    events = store.recent_events(since=t0 + 5, limit=10)
    assert events == [JobEvent(queued.id, "prep", S.HELD, t0 + 20, "held by alice"),
                      JobEvent(running.id, "train", S.RUNNING, t0 + 10, f"moved to {S.RUNNING}"),
                      JobEvent(running.id, "train", S.STARTING, t0 + 10, f"moved to {S.STARTING}")]


def test_a_finished_job_is_listed_by_its_last_transition(store, t0):
    done = put(store, S.SUCCEEDED, name="eval", at=t0 + 30, fields={"ended_at": t0 + 30}, submitted_at=t0)
    put(store, S.QUEUED, name="waiting", submitted_at=t0)
    [latest] = store.recent_events(since=t0 + 1, limit=1)
    assert latest == JobEvent(done.id, "eval", S.SUCCEEDED, t0 + 30, f"moved to {S.SUCCEEDED}")


def test_older_transitions_and_those_past_the_limit_are_left_out(store, t0):
    jobs = [put(store, S.HELD, at=t0 + n, submitted_at=t0) for n in range(1, 6)]
    events = store.recent_events(since=t0 + 2, limit=3)
    assert [(e.job_id, e.at) for e in events] == [(jobs[4].id, t0 + 5), (jobs[3].id, t0 + 4), (jobs[2].id, t0 + 3)]
