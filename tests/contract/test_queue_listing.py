"""QueueReads.queue_listing(), on every backend: the live jobs' rows and their scheduling view from one
state of the store, so a listing of the queue tells positions and free GPUs of the rows it shows."""

from collections.abc import Callable
from typing import Any

from gqa.models.job import JobState
from gqa.ports import Change
from tests.contract.jobs import T0, put

S = JobState


def ids_in(records, *states: JobState) -> list[str]:
    return [j.id for j in records if j.state in states]


def agrees(listing) -> None:
    """Each job listed once, and the scheduling view is that of the rows."""
    records = [j.id for j in listing.records]
    assert len(records) == len(set(records))
    assert sorted(p.id for p in listing.pending) == sorted(ids_in(listing.records, S.QUEUED, S.HELD))
    assert sorted(r.id for r in listing.running) == sorted(ids_in(listing.records, S.STARTING, S.RUNNING))
    held = {r.id: r.gpus for r in listing.running}
    assert held == {j.id: j.assigned for j in listing.records if j.id in held}


def test_the_listing_is_the_live_jobs_rows_and_their_scheduling_view(store):
    queued = put(store, S.QUEUED)
    held = put(store, S.HELD)
    starting = put(store, S.STARTING, fields={"assigned": (1,)})
    running = put(store, S.RUNNING, fields={"assigned": (0,), "started_at": T0})
    retrying = put(store, S.RETRY_WAIT)
    for state in (S.SUCCEEDED, S.CANCELLED, S.FAILED):
        put(store, state)

    listing = store.queue_listing()

    agrees(listing)
    assert [j.id for j in listing.records] == [queued.id, held.id, starting.id, running.id, retrying.id]
    pending, holding = store.scheduling_view()
    assert sorted(listing.pending, key=lambda p: p.seq) == sorted(pending, key=lambda p: p.seq)
    assert sorted(listing.running, key=lambda r: r.id) == sorted(holding, key=lambda r: r.id)
    # a launch's wait is timed from its claim: the STARTING jobs come with their transitions
    timed = {j.id: j.history for j in listing.records}
    assert [t.state for t in timed[starting.id]][-1] == S.STARTING
    assert timed[queued.id] == () and timed[running.id] == ()


def between_reads(store, monkeypatch, change: Callable[[], None]) -> list[bool]:
    """Make `change` once, in the midst of the store's listing: on SQLite as it reads the rows (after
    their scheduling columns), on DynamoDB after the first Query that found a job. What it returns
holds True once the change is made."""
    done = []

    def once() -> None:
        if not done:
            done.append(True)
            change()

    if hasattr(store, "call"):   # DynamoDB: its client's calls
        query = store.call

        def call(method: str, **kwargs: Any) -> Any:
            out = query(method, **kwargs)
            if method == "Query" and out.get("Items"):
                once()
            return out
        monkeypatch.setattr(store, "call", call)
    else:
        rows = store.list

        def listed(*args: Any, **kwargs: Any) -> Any:
            once()
            return rows(*args, **kwargs)
        monkeypatch.setattr(store, "list", listed)
    return done


def test_a_job_that_starts_while_the_listing_is_read_is_listed_once_as_one_state_held_it(open_store,
                                                                                         monkeypatch):
    store, daemon = open_store(), open_store()
    moving = put(store, S.QUEUED)
    bystander = put(store, S.RUNNING, fields={"assigned": (0,), "started_at": T0})
    changed = between_reads(store, monkeypatch, lambda: daemon.apply(
        [Change(moving.id, S.QUEUED, S.STARTING, "claimed", T0 + 1, {"assigned": (1,)})]))

    listing = store.queue_listing()

    assert changed
    agrees(listing)
    assert sorted(j.id for j in listing.records) == sorted([moving.id, bystander.id])
