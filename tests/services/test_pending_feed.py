"""The daemon's passes over a store that says which pending jobs changed (ports.PendingFeed): the
estimated records and the kept index are brought by those changes alone, and every pass must start
what a pass over the store's whole listing starts."""

import random

import pytest

from gqa.adapters.local.store import SqliteStore
from gqa.models.job import JobState
from gqa.ports import PendingFeed
from gqa.services.snapshot import Estimated
from tests.builders import pending
from tests.services.conftest import Queue

S = JobState


class ListingOnly(SqliteStore):
    """The same store, without its feed: each pass looks at every pending job."""
    scheduling_feed = None   # type: ignore[assignment]


def run_workload(store: SqliteStore, seed: int, steps: int) -> tuple[list, Queue]:
    rng, queue = random.Random(seed), Queue(store, 8)
    starts: list = []
    running: list[str] = []
    for _ in range(steps):
        roll = rng.random()
        queued = [j.id for j in queue.store.list([S.QUEUED])]
        if roll < 0.25 or not queued:
            queue.submit(team=rng.choice(("vision", "nlp", "audio")), array=f"0-{rng.randint(0, 30)}",
                         resources={"gpus": rng.choice((1, 1, 2, 4))}, limits={"wall_time": f"{rng.randint(1, 8)}h"})
        elif roll < 0.3:
            queue.control.cancel(rng.sample(queued, min(3, len(queued))))
        elif roll < 0.35:
            queue.control.hold(rng.sample(queued, 1))
        elif roll < 0.4:
            held = [j.id for j in queue.store.list([S.HELD])]
            if held:
                queue.control.release(held[:2])
        elif roll < 0.45:
            queue.control.update(rng.choice(queued), priority=rng.choice(("high", "low", "normal")))
        elif running:
            queue.clock.advance(rng.uniform(30, 900))
            queue.exit(running.pop(rng.randrange(len(running))), rng.choice((0, 0, 0, 1)))
        started = queue.supervisor.dispatch()
        running += [j.id for j in started]
        running = [j for j in running if queue.get(j).state in (S.STARTING, S.RUNNING)]
        starts.append(sorted((j.id, j.assigned) for j in started))
    return starts, queue


@pytest.mark.parametrize("seed", range(3))
def test_passes_fed_the_changes_start_what_passes_over_the_whole_listing_start(tmp_path, seed):
    fed, fed_queue = run_workload(SqliteStore(tmp_path / "fed.db"), seed, 160)
    listed, listed_queue = run_workload(ListingOnly(tmp_path / "listed.db"), seed, 160)
    try:
        assert isinstance(fed_queue.store, PendingFeed) and not isinstance(listed_queue.store, PendingFeed)
        assert fed == listed and sum(map(len, fed)) > 50
        kept = fed_queue.supervisor.kept
        assert kept.hinted > 100 and listed_queue.supervisor.kept.hinted == 0
        assert [(j.id, j.state) for j in fed_queue.store.list()] == [(j.id, j.state) for j in listed_queue.store.list()]
    finally:
        fed_queue.store.close()
        listed_queue.store.close()


def test_changes_fed_give_the_records_a_whole_listing_gives_in_its_order():
    jobs = [pending(str(i), team="ab"[i % 2], wall_time=3600.0 * (1 + i % 3)) for i in range(6)]
    ratios = {"a": 0.5, "b": 0.2}
    kept = Estimated(kept=True)
    first = kept.pending(jobs, ratios, ("m1", None))
    assert kept.changes is None and kept.mark == "m1"
    moved = pending("1", team="b", wall_time=600.0)
    now = [jobs[0], jobs[2], jobs[3], jobs[4], jobs[5], moved]          # "1" left and came back last
    changes = [("1", None), ("1", moved), ("9", None)]                   # "9": gone before it was seen
    fed = kept.pending(now, ratios, ("m2", changes))
    assert fed == Estimated().pending(now, ratios) and [j.id for j in fed] == [j.id for j in now]
    assert kept.mark == "m2" and set(kept.changes) == {"1", "9"} and kept.changes["9"] is None
    assert all(fed[i] is first[j] for i, j in [(0, 0), (1, 2), (4, 5)])   # unchanged: the very records
    # a ratio that moved: every record is looked at, from the whole listing
    again = kept.pending(now, {"a": 0.25, "b": 0.2}, ("m3", []))
    assert kept.changes is None and again == Estimated().pending(now, {"a": 0.25, "b": 0.2})


def test_changes_that_do_not_add_up_to_the_listing_are_not_trusted():
    """A feed that missed a job (the listing has one more than the changes give): every job is
    looked at, and the next feed starts from this listing."""
    jobs = [pending(str(i), wall_time=3600.0) for i in range(4)]
    kept = Estimated(kept=True)
    kept.pending(jobs, {}, ("m1", None))
    now = jobs + [pending("new", wall_time=600.0)]
    assert kept.pending(now, {}, ("m2", [])) == Estimated().pending(now, {})
    assert kept.changes is None and kept.mark == "m2"
    assert kept.pending(now[1:], {}, ("m3", [("0", None)])) == Estimated().pending(now[1:], {})
    assert kept.changes == {"0": None}
