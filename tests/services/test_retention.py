"""Retention on the local store: finished jobs past the kept days go, a batch
per transaction, with their history; a prune that dies mid-way leaves whole
batches done and the rest as they were, and the next one carries on; one run
twice does nothing more."""

import pytest

from daemon.loop import PRUNE_EVERY, PRUNE_SOON, DaemonLoop
from gqa.adapters.local.store import SqliteStore
from gqa.models.errors import GqaError
from gqa.models.job import JobState
from gqa.ports import Change, HistoryQuery
from gqa.services.retention import DAY, Retention
from tests.contract.jobs import new_job
from tests.services.fakes import FakeClock

S = JobState
NOW = 1_796_000_000.0


@pytest.fixture
def store(tmp_path):
    store = SqliteStore(tmp_path / "gqa.db", durable=False)
    yield store
    store.close()


def ended(store, n: int, at: float) -> list[str]:
    jobs = store.create([new_job(submitted_at=at - 60) for _ in range(n)])
    store.apply([Change(j.id, S.QUEUED, S.CANCELLED, "cancelled by user", at, {"ended_at": at}) for j in jobs])
    return [j.id for j in jobs]


def kept(store) -> int:
    return store.db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def transitions(store) -> int:
    return store.db.execute("SELECT COUNT(*) FROM history").fetchone()[0]


def test_jobs_past_the_retention_go_with_their_history_a_batch_at_a_time(store):
    old, recent = ended(store, 7, NOW - 100 * DAY), ended(store, 2, NOW - DAY)
    [waiting] = store.create([new_job(submitted_at=NOW - 200 * DAY)])   # never ended: never pruned
    retention = Retention(store, FakeClock(NOW), 90 * DAY, batch=3, batches=2)
    assert retention.prune() == (6, True)      # two batches of three: more are due
    assert retention.prune() == (1, False)
    assert retention.prune() == (0, False)     # run again: nothing more
    assert kept(store) == 3 and transitions(store) == 2 * 3 + 2
    ids = [j.id for j in store.history(HistoryQuery(since=0))[0]]
    assert ids == list(reversed(recent)) and store.get(waiting.id).state == S.QUEUED
    assert not set(old) & {j.id for j in store.list()}


def test_a_prune_that_dies_mid_way_keeps_whole_batches_and_the_next_carries_on(store):
    old = ended(store, 6, NOW - 100 * DAY)
    before = transitions(store)
    # the fifth job's row cannot be deleted (a disk error, say): its batch fails whole
    store.db.execute(f"CREATE TRIGGER refuse BEFORE DELETE ON jobs WHEN old.id = '{old[4]}' "
                     "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")
    retention = Retention(store, FakeClock(NOW), 90 * DAY, batch=3, batches=5)
    with pytest.raises((GqaError, Exception)):
        retention.prune()
    assert kept(store) == 3 and transitions(store) == before // 2   # the first batch went, the second stayed whole
    assert {j.id for j in store.list()} == set(old[3:])
    store.db.execute("DROP TRIGGER refuse")
    assert retention.prune() == (3, False) and kept(store) == 0 and transitions(store) == 0


class Wiring:
    keep_history = 90.0

    def __init__(self, retention):
        self.retention = retention


def test_the_daemon_comes_back_soon_while_more_are_due_and_survives_a_failure(store):
    ended(store, 5, NOW - 100 * DAY)
    loop = DaemonLoop.__new__(DaemonLoop)
    loop.wiring = Wiring(Retention(store, FakeClock(NOW), 90 * DAY, batch=2, batches=1))
    assert loop._prune() == PRUNE_SOON and kept(store) == 3
    loop.wiring.retention.store = None      # the next one fails: logged, tried again later
    assert loop._prune() == PRUNE_EVERY
    loop.wiring = Wiring(None)              # --keep-history 0: nothing pruned
    assert loop._prune() == PRUNE_EVERY
