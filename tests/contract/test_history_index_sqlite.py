"""SQLite's history reads by its indexes, never a scan of the jobs, and a
database of this schema version written before an index gets it on open."""

import pytest

from gqa.adapters.local.store import SqliteStore
from gqa.models.priority import Priority
from gqa.ports import BETWEEN_ATTEMPTS, WAITING_STATES, HistoryQuery
from tests.contract.jobs import S, put


class Recorded:
    """The store's connection, keeping each statement with its parameters: SQLite plans a bound
    parameter as any value, where a value written in the text may plan otherwise."""

    def __init__(self, db):
        self.db, self.seen = db, []

    def execute(self, sql, params=()):
        self.seen.append((sql, params))
        return self.db.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self.db, name)


def plans(store, query, after=None):
    """The query plan of every statement history() runs."""
    recorded = store.db = Recorded(store.db)
    try:
        store.history(query, after)
    finally:
        store.db = recorded.db
    return [" / ".join(r[3] for r in store.db.execute("EXPLAIN QUERY PLAN " + sql, params))
            for sql, params in recorded.seen if sql.lstrip().upper().startswith("SELECT")]


def test_finished_jobs_are_read_by_the_end_index(tmp_path):
    store = SqliteStore(tmp_path / "gqa.db")
    put(store, S.SUCCEEDED, fields={"ended_at": 2_000.0})
    finished, mine = (plans(store, HistoryQuery(since=1_000.0, states=frozenset({S.SUCCEEDED}))),
                      plans(store, HistoryQuery(since=1_000.0, owner="alice", states=frozenset({S.FAILED}))))
    assert "USING INDEX jobs_by_end" in finished[0] and "SCAN jobs" not in finished[0]
    assert "USING INDEX jobs_by_owner_end" in mine[0]
    assert "USING INDEX jobs_by_state" in plans(store, HistoryQuery(since=1_000.0))[0]   # running ones first
    assert all("PRIMARY KEY" in p or "INDEX" in p for p in finished[1:])   # their transitions, by key


@pytest.mark.parametrize("query, between, ranges", [
    (HistoryQuery(since=1_000.0), 1, 0),
    (HistoryQuery(since=1_000.0, owner="alice"), 1, 0),
    (HistoryQuery(since=1_000.0, states=frozenset({S.HELD, S.QUEUED})), 1, 0),
    (HistoryQuery(since=1_000.0, waiting=True), 1, len(WAITING_STATES) * len(Priority)),   # not started yet too
    (HistoryQuery(since=1_000.0, waiting=True, states=frozenset({S.PENDING_APPROVAL})), 0, len(Priority)),
])
def test_jobs_between_attempts_and_not_started_are_read_by_index_in_order(tmp_path, query, between, ranges):
    """The jobs between attempts by their own index, the ones not started a range of the state index
    per state and tier in seq order: never the queue's every job, read and sorted."""
    store = SqliteStore(tmp_path / "gqa.db")
    put(store, S.RETRY_WAIT, fields={"started_at": 1_500.0})
    put(store, S.QUEUED)
    found = plans(store, query)
    assert sum("USING INDEX jobs_between (started_at>?)" in p for p in found) == between
    assert sum("USING INDEX jobs_by_state (state=? AND tier=?)" in p for p in found) == ranges
    assert not any("SCAN jobs" in p for p in found)
    assert all("TEMP B-TREE" not in p for p in found if "jobs_between" in p or "tier=?" in p)


@pytest.mark.parametrize("states, waiting", [(frozenset({S.SUCCEEDED}), False), (BETWEEN_ATTEMPTS, False),
                                            (frozenset({S.QUEUED}), True)])
def test_a_later_page_reads_on_down_the_index_not_the_whole_window_sorted(tmp_path, states, waiting):
    store = SqliteStore(tmp_path / "gqa.db")
    for k in range(3):
        put(store, S.SUCCEEDED, fields={"ended_at": 2_000.0 + k})
        put(store, S.RETRY_WAIT, fields={"started_at": 1_500.0 + k})
        put(store, S.QUEUED)
    query = HistoryQuery(since=1_000.0, limit=1, states=states, waiting=waiting)
    later = plans(store, query, store.history(query)[1])
    read = [p for p in later if p.startswith("SEARCH jobs USING INDEX jobs_") and "<?" in p]
    assert read, later
    assert all("TEMP B-TREE" not in p and "MULTI-INDEX OR" not in p for p in read)


def test_a_database_without_the_index_gets_it_on_open(tmp_path):
    store = SqliteStore(tmp_path / "gqa.db")
    for index in ("jobs_by_end", "jobs_by_owner_end", "jobs_between"):
        store.db.execute(f"DROP INDEX {index}")
    store.close()
    again = SqliteStore(tmp_path / "gqa.db")
    names = {r[0] for r in again.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"jobs_by_end", "jobs_by_owner_end", "jobs_between"} <= names
