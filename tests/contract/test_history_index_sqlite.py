"""SQLite's history reads by its index, never a scan of the jobs, and a
database of this schema version written before the index gets it on open."""

from gqa.adapters.local.store import SqliteStore
from gqa.ports import HistoryQuery
from tests.contract.jobs import S, put


def plans(store, query):
    """The query plan of every statement history() runs."""
    seen: list[str] = []
    store.db.set_trace_callback(seen.append)
    try:
        store.history(query)
    finally:
        store.db.set_trace_callback(None)
    return [" / ".join(r[3] for r in store.db.execute("EXPLAIN QUERY PLAN " + sql)) for sql in seen
            if sql.lstrip().upper().startswith("SELECT")]


def test_finished_jobs_are_read_by_the_end_index(tmp_path):
    store = SqliteStore(tmp_path / "gqa.db")
    put(store, S.SUCCEEDED, fields={"ended_at": 2_000.0})
    finished, mine = (plans(store, HistoryQuery(since=1_000.0, states=frozenset({S.SUCCEEDED}))),
                      plans(store, HistoryQuery(since=1_000.0, owner="alice", states=frozenset({S.FAILED}))))
    assert "USING INDEX jobs_by_end" in finished[0] and "SCAN jobs" not in finished[0]
    assert "USING INDEX jobs_by_owner_end" in mine[0]
    assert "USING INDEX jobs_by_state" in plans(store, HistoryQuery(since=1_000.0))[0]   # running ones first
    assert all("PRIMARY KEY" in p or "INDEX" in p for p in finished[1:])   # their transitions, by key


def test_a_database_without_the_index_gets_it_on_open(tmp_path):
    store = SqliteStore(tmp_path / "gqa.db")
    store.db.execute("DROP INDEX jobs_by_end")
    store.db.execute("DROP INDEX jobs_by_owner_end")
    store.close()
    again = SqliteStore(tmp_path / "gqa.db")
    names = {r[0] for r in again.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"jobs_by_end", "jobs_by_owner_end"} <= names
