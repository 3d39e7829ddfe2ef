"""The daemon's passes over a store that says which pending jobs changed (ports.PendingFeed): the
estimated records, the kept index, the dependencies and --begin times are brought by those changes
alone, and every pass must start, cancel and wake when a pass over the store's whole listing does."""

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
            extra: dict = {}
            if queued and rng.random() < 0.3:   # after a job that may fail, start or be cancelled
                extra["after"] = f"{rng.choice(('afterok', 'afterany'))}:{rng.choice(queued)}"
            if rng.random() < 0.2:
                extra["begin"] = queue.clock.now() + rng.uniform(60, 7200)
            queue.submit(team=rng.choice(("vision", "nlp", "audio")), array=f"0-{rng.randint(0, 30)}",
                         resources={"gpus": rng.choice((1, 1, 2, 4))}, limits={"wall_time": f"{rng.randint(1, 8)}h"},
                         **extra)
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
        starts.append((sorted((j.id, j.assigned) for j in started), queue.supervisor.next_deadline()))
    return starts, queue


@pytest.mark.parametrize("seed", range(3))
def test_passes_fed_the_changes_start_what_passes_over_the_whole_listing_start(tmp_path, seed):
    fed, fed_queue = run_workload(SqliteStore(tmp_path / "fed.db"), seed, 160)
    listed, listed_queue = run_workload(ListingOnly(tmp_path / "listed.db"), seed, 160)
    try:
        assert isinstance(fed_queue.store, PendingFeed) and not isinstance(listed_queue.store, PendingFeed)
        assert fed == listed and sum(len(s) for s, _ in fed) > 50
        assert sum(1 for j in fed_queue.store.list() if j.dependency) > 20   # dependencies were read as kept
        assert sum(1 for j in fed_queue.store.list() if j.begin) > 10        # and --begin times
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


@pytest.mark.parametrize("seed", range(4))
def test_the_dependencies_and_begin_times_kept_with_a_fed_listing_are_those_of_its_jobs(seed):
    rng = random.Random(seed)
    listing: dict[str, object] = {}
    kept, n = Estimated(kept=True), 0

    def made(job_id):
        return pending(job_id, wall_time=3600.0, dependency=rng.choice((None, None, "afterok:1", "afterany:2_3")),
                       begin=rng.choice((None, None, 5_000.0 + n)))

    for _ in range(20):
        listing[str(n)] = made(str(n))
        n += 1
    kept.pending(list(listing.values()), {}, (0, None))
    for mark in range(1, 60):
        changes = []
        for _ in range(rng.randint(0, 4)):
            roll, job_id = rng.random(), rng.choice(list(listing) or ["none"])
            if roll < 0.3 or not listing:
                job_id, n = str(n), n + 1
            elif roll < 0.5:
                del listing[job_id]
                changes.append((job_id, None))
                continue
            listing[job_id] = made(job_id)
            changes.append((job_id, listing[job_id]))
        jobs = list(listing.values())
        assert kept.pending(jobs, {}, (mark, changes)) == Estimated().pending(jobs, {})
        assert kept.changes is not None   # the changes alone were taken
        assert set(kept.dependencies()) == {j.dependency for j in jobs if j.dependency}
        assert sorted(kept.begin_times()) == sorted(j.begin for j in jobs if j.begin is not None)
    kept.pending(jobs, {})   # not fed: nothing kept stands for these jobs
    assert kept.dependencies() is None and kept.begin_times() is None


def test_changes_that_fail_halfway_leave_a_whole_look_for_the_next_call():
    """An estimate that raises midway through the changes (the pass dies there): the kept listing
    is half changed, so the next call must not take changes against it, but look at every job."""
    jobs = [pending(str(i), wall_time=3600.0) for i in range(4)]
    kept = Estimated(kept=True)
    kept.pending(jobs, {}, ("m1", None))
    made, calls = kept._estimated, []

    def fails_on_the_second(seen, into, job, ratio):
        calls.append(job.id)
        if len(calls) == 2:
            raise OSError("disk full")
        return made(seen, into, job, ratio)
    kept._estimated = fails_on_the_second
    now = [jobs[0], pending("1", wall_time=60.0), jobs[2], jobs[3], pending("new", wall_time=600.0)]
    with pytest.raises(OSError):
        kept.pending(now, {}, ("m2", [("1", now[1]), ("new", now[4])]))
    assert kept.mark is None   # the next feed hands back no changes against a mark it cannot match
    kept._estimated = made
    assert kept.pending(now, {}, ("m3", None)) == Estimated().pending(now, {})
    assert kept.changes is None and kept.mark == "m3"
    assert kept.pending(now, {}, ("m4", [])) == Estimated().pending(now, {}) and kept.changes == {}
