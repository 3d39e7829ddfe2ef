"""The daemon's store keeps its scheduling view between reads and reads only the rows changed since
(adapters/local/live_view.py): what it hands back is always what a store opened afresh reads, and
an unchanged job keeps its very record."""

import random
import sqlite3

import pytest

from gqa.adapters.local.store import SCHEMA_VERSION, SqliteStore
from gqa.models.job import JobState
from gqa.ports import Change
from tests.builders import job_record, left_at_version

S = JobState


@pytest.fixture
def path(tmp_path):
    return tmp_path / "queue.db"


@pytest.fixture
def store(path):
    """The daemon's store object, over a queue of its own."""
    store = SqliteStore(path)
    yield store
    store.close()


def as_read(view):
    pending, running = view
    return {j.id: j for j in pending}, {r.id: r for r in running}


def fresh(path):
    store = SqliteStore(path)
    try:
        return as_read(store.scheduling_view())
    finally:
        store.close()


def whole_reads(store):
    return store.live_view.whole_reads


def create(store, n, at=0.0):
    return store.create([job_record(id="", group="", submitted_at=at, wall_time=3600 * (1 + i % 4))
                         for i in range(n)])


# what each kind of change does to one job: (from, to, fields)
MOVES = [
    (S.QUEUED, S.STARTING, lambda j, at: {"assigned": (0,), "attempts": j.attempts + 1}),
    (S.STARTING, S.RUNNING, lambda j, at: {"started_at": at, "pid": 100}),
    (S.RUNNING, S.SUCCEEDED, lambda j, at: {"ended_at": at, "assigned": ()}),
    (S.RUNNING, S.RETRY_WAIT, lambda j, at: {"assigned": ()}),
    (S.RETRY_WAIT, S.QUEUED, lambda j, at: {}),
    (S.QUEUED, S.HELD, lambda j, at: {}),
    (S.HELD, S.QUEUED, lambda j, at: {}),
    (S.QUEUED, S.CANCELLED, lambda j, at: {"ended_at": at}),
    (S.RUNNING, None, lambda j, at: {"gpu_util": 50.0, "gpu_seconds": at}),   # a sample, no transition
    (S.QUEUED, None, lambda j, at: {"nice": 10}),                            # an update of a waiting job
]


def random_step(rng, writer, at):
    """One write by `writer`: a few jobs created, or one job moved by one of MOVES (that job)."""
    if rng.random() < 0.1:
        create(writer, rng.randint(1, 3), at=at)
        return None
    job = rng.choice([j for j in writer.list() if any(j.state == m[0] for m in MOVES)])
    expect, to, fields = rng.choice([m for m in MOVES if m[0] == job.state])
    writer.apply([Change(job.id, expect, to, "test", at, fields(job, at))])
    return job


@pytest.mark.parametrize("seed", range(4))
def test_a_kept_view_reads_what_a_fresh_store_reads_after_every_kind_of_change(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "queue.db"
    store, other = SqliteStore(path), SqliteStore(path)   # the daemon, and a CLI beside it
    try:
        create(store, 30)
        before = as_read(store.scheduling_view())
        for step in range(60):
            job = random_step(rng, rng.choice((store, other)), float(step))
            after = as_read(store.scheduling_view())
            assert after == fresh(path)
            for now, then in zip(after, before):   # a job whose row did not change keeps its record
                for job_id, record in now.items():
                    if job_id in then and then[job_id] == record and (job is None or job_id != job.id):
                        assert then[job_id] is record
            before = after
        assert whole_reads(store) == 1
    finally:
        store.close()
        other.close()


class Follower:
    """A reader of the store's feed that keeps its own copy of the pending jobs, as the daemon's
    passes do (services/snapshot.Estimated): the changes replayed in order, or a whole read."""

    def __init__(self, store):
        self.store, self.mark, self.copy, self.whole = store, None, {}, 0

    def follow(self):
        pending, _, self.mark, changes = self.store.scheduling_feed(self.mark)
        if changes is None:
            self.copy, self.whole = {j.id: j for j in pending}, self.whole + 1
        else:
            for job_id, job in changes:
                if job is None:
                    self.copy.pop(job_id, None)
                else:
                    self.copy[job_id] = job
        return pending


@pytest.mark.parametrize("seed", range(4))
def test_the_feed_s_changes_replayed_in_order_give_the_view_in_its_order_and_records(tmp_path, seed):
    """Reads by the store's other callers between two of the follower's take nothing from it."""
    rng = random.Random(seed)
    path = tmp_path / "queue.db"
    store, other = SqliteStore(path), SqliteStore(path)
    follower = Follower(store)
    try:
        create(store, 30)
        follower.follow()
        for step in range(120):
            random_step(rng, rng.choice((store, other)), float(step))
            if rng.random() < 0.5:
                store.scheduling_view()     # another caller of the same store object (gqa queue, a deadline)
            if rng.random() < 0.6:
                pending = follower.follow()
                assert list(follower.copy) == [j.id for j in pending]
                assert all(a is b for a, b in zip(follower.copy.values(), pending))
        assert follower.whole == 1 and whole_reads(store) == 1
    finally:
        store.close()
        other.close()


def test_a_job_that_left_the_queue_and_came_back_between_two_follows_is_listed_last(store):
    """As the view lists it, read by another caller as the job moved: a replay that only updated
    the job where it stood would list it first."""
    first, *others = create(store, 3)
    follower = Follower(store)
    follower.follow()
    for expect, to, fields in [MOVES[0], MOVES[1], MOVES[3], MOVES[4]]:   # started, requeued, queued again
        job = store.get(first.id)
        store.apply([Change(first.id, expect, to, "test", 1.0, fields(job, 1.0))])
        store.scheduling_view()
    pending = follower.follow()
    assert [j.id for j in pending] == [j.id for j in others] + [first.id] == list(follower.copy)


def test_the_feed_says_it_does_not_know_where_a_whole_read_came_between(path, store, monkeypatch):
    from gqa.adapters.local import live_view
    create(store, 5)
    follower = Follower(store)
    follower.follow()
    stale = follower.mark
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("UPDATE meta SET value = '1' WHERE key = 'revision'")   # a copy of the file put back
    raw.close()
    store.scheduling_view()                                           # read whole by another caller
    assert store.scheduling_feed(stale)[3] is None
    assert store.scheduling_feed(("another", 0))[3] is None and store.scheduling_feed(None)[3] is None
    # a follower left behind by more changes than the log keeps reads whole
    monkeypatch.setattr(live_view, "LOG_AT_LEAST", 4)
    follower.follow()
    jobs = store.list([S.QUEUED])
    for n in range(2 * len(jobs) + 1):   # past twice the pending jobs
        store.apply([Change(jobs[n % len(jobs)].id, S.QUEUED, None, "test", 1.0, {"nice": n + 1})])
        store.scheduling_view()
    assert store.scheduling_feed(follower.mark)[3] is None
    # and inside a write, which may be rolled back, nothing is kept or told
    with store._tx():
        assert store.scheduling_feed(None)[2:] == (None, None)


def test_a_write_outside_a_transaction_is_seen_though_it_bumps_no_revision(path, store):
    [job] = create(store, 1)
    store.scheduling_view()
    raw = sqlite3.connect(path, isolation_level=None)   # autocommit: no revision bump
    raw.execute("UPDATE jobs SET nice = 7 WHERE id = ?", (job.id,))
    raw.close()
    [pending], _ = store.scheduling_view()
    assert pending.nice == 7 and whole_reads(store) == 1


def test_a_live_job_deleted_or_a_revision_gone_back_makes_the_next_read_whole(path, store):
    jobs = create(store, 3)
    store.scheduling_view()
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("DELETE FROM jobs WHERE id = ?", (jobs[0].id,))
    assert as_read(store.scheduling_view()) == fresh(path) and len(fresh(path)[0]) == 2
    assert whole_reads(store) == 2
    raw.execute("UPDATE meta SET value = '1' WHERE key = 'revision'")   # a copy of the file put back
    raw.close()
    store.scheduling_view()
    assert whole_reads(store) == 3


def test_a_read_inside_a_write_that_is_rolled_back_is_not_kept(path, store):
    [job] = create(store, 1)
    store.scheduling_view()
    with pytest.raises(RuntimeError):
        with store._tx():
            store.db.execute("UPDATE jobs SET state = 'HELD' WHERE id = ?", (job.id,))
            [inside], _ = store.scheduling_view()
            assert inside.held
            raise RuntimeError("the write fails after the read")
    [after], _ = store.scheduling_view()
    assert not after.held and as_read(store.scheduling_view()) == fresh(path)


def test_a_version_5_file_gains_the_stamps_and_its_view_follows_changes(tmp_path):
    path = tmp_path / "queue.db"
    store = SqliteStore(path)
    [job] = create(store, 1)
    store.close()
    left_at_version(path, 5, *(f"DROP TRIGGER {trigger}"   # no stamps, no triggers
                               for trigger in ("jobs_rev_on_insert", "jobs_rev_on_update", "jobs_live_deleted")),
                    "DROP INDEX jobs_by_rev", "ALTER TABLE jobs DROP COLUMN rev")

    store = SqliteStore(path)
    try:
        assert store._meta("schema_version") == str(SCHEMA_VERSION)
        [pending], _ = store.scheduling_view()
        assert pending.id == job.id
        store.apply([Change(job.id, S.QUEUED, S.HELD, "test", 1.0)])
        create(store, 1)
        assert as_read(store.scheduling_view()) == fresh(path) and whole_reads(store) == 1
        assert [j.held for j in store.scheduling_view()[0]] == [True, False]
    finally:
        store.close()
