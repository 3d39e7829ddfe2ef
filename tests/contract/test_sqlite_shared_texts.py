"""The local store keeps a job's spec and its submitter's environment once in
`texts`, however many rows share them (an array's tasks, a sweep's jobs),
counts the rows that hold each, and lets a text go with the last of them:
whichever write adds, changes or removes a row, and never half of one. And
a large group reads back whole in a few queries: its texts decoded once,
its transitions 500 tasks to a query."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gqa.adapters.local.notice_outbox import NoticeOutbox
from gqa.adapters.local.sqlite_rows import KEY_MARK, SHARED_LEAST
from gqa.adapters.local.store import SCHEMA_VERSION, SqliteStore
from gqa.models.errors import Conflict
from gqa.models.job import JobState as S
from gqa.models.job import Transition
from gqa.ports import Change
from tests.builders import job_record, left_at_version

ENV = {f"VAR_{i}": "x" * 100 for i in range(100)}      # a 10 KB environment, as a loaded shell's


def tasks(n: int, env: dict | None = ENV, spec: dict | None = None) -> list:
    """An array of n tasks as the submit service makes one: one spec text and one environment dict."""
    first = job_record(id="", group="", array_index=0, submit_env=env,
                       spec=spec)
    return [first] + [job_record(id="", group="", array_index=i, submit_env=first.submit_env,
                                 spec_json=first.spec_json) for i in range(1, n)]


def counted(store: SqliteStore) -> dict[str, int]:
    return dict(store.db.execute("SELECT hash, refs FROM texts"))


def held(store: SqliteStore) -> dict[str, int]:
    """What the rows hold, counted afresh: the invariant `refs` keeps."""
    out: dict[str, int] = {}
    for column in ("spec_json", "submit_env"):
        for key, n in store.db.execute(f"SELECT {column}, COUNT(*) FROM jobs WHERE {column} LIKE '{KEY_MARK}%' "
                                       f"GROUP BY {column}"):
            out[key] = out.get(key, 0) + n
    return out


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "queue.db")
    yield s
    s.close()


def test_an_array_keeps_its_spec_and_environment_once_and_reads_back_whole(store):
    made = store.create(tasks(500))
    assert len(counted(store)) == 2 and set(counted(store).values()) == {500}
    assert counted(store) == held(store)
    # each row holds two keys, not the 10 KB
    widest = store.db.execute("SELECT MAX(length(spec_json) + length(submit_env)) FROM jobs").fetchone()[0]
    assert widest == 2 * 65
    for again in (store.get(made[7].id), store.resolve(made[0].group, history=False)[7],
                  store.list([S.QUEUED])[7]):
        assert again.submit_env == ENV and again.spec_json == made[7].spec_json
    # each record its own copy: changing one's environment changes no other's
    group = store.resolve(made[0].group, history=False)
    group[0].submit_env["VAR_0"] = "changed"
    assert group[1].submit_env == ENV


def test_a_short_environment_stays_in_its_row(store):
    [job] = store.create([job_record(id="", group="", submit_env={"A": "1"})])
    assert len('{"A": "1"}') < SHARED_LEAST
    assert store.db.execute("SELECT submit_env FROM jobs").fetchone()[0] == '{"A": "1"}'
    assert store.get(job.id).submit_env == {"A": "1"} and len(counted(store)) == 1   # the spec alone


def test_the_same_submission_twice_counts_its_rows_once(store):
    made = store.create(tasks(20))
    before = counted(store)
    again = store.create(made)                     # the same ids: already there, returned as stored
    assert [j.id for j in again] == [j.id for j in made]
    assert counted(store) == before == held(store)


def test_a_failed_create_leaves_no_text(store):
    [first] = store.create([job_record(id="", group="")])
    clash = job_record(id="", group="", submit_env=ENV, spec={"name": "other"})
    store.db.execute("UPDATE meta SET value = ? WHERE key = 'next_seq'", (str(first.seq),))   # its seq taken
    with pytest.raises(Conflict):
        store.create([clash])
    assert counted(store) == held(store) and len(counted(store)) == 1


def test_an_update_moves_the_rows_to_the_new_spec_and_the_old_goes_with_the_last(store):
    made = store.create(tasks(10))
    old_spec = store.db.execute("SELECT spec_json FROM jobs LIMIT 1").fetchone()[0]
    new_json = job_record(spec={"name": "renamed"}).spec_json
    # bulk (an array's update) for 9 tasks, guarded for the tenth
    store.apply_each([Change(j.id, S.QUEUED, None, "update", 1.0, {"spec_json": new_json}) for j in made[:9]])
    assert counted(store)[old_spec] == 1 and counted(store) == held(store)
    store.apply([Change(made[9].id, S.QUEUED, None, "update", 1.0, {"spec_json": new_json})])
    assert old_spec not in counted(store) and counted(store) == held(store)
    assert {j.spec_json for j in store.list()} == {new_json}


def test_a_guarded_change_that_conflicts_leaves_no_text(store):
    [job] = store.create(tasks(1))
    before = counted(store)
    new_json = job_record(spec={"name": "renamed"}).spec_json
    with pytest.raises(Conflict):
        store.apply([Change(job.id, S.RUNNING, None, "update", 1.0, {"spec_json": new_json})])
    assert counted(store) == before == held(store)


def test_pruning_lets_each_text_go_with_its_last_row(store):
    made = store.create(tasks(6))
    store.apply_each([Change(j.id, S.QUEUED, S.CANCELLED, "cancelled", float(i), {"ended_at": float(i)})
                      for i, j in enumerate(made)])
    assert store.prune_history(before=3.0, batch=500) == 3
    assert set(counted(store).values()) == {3} and counted(store) == held(store)
    assert store.prune_history(before=10.0, batch=500) == 3
    assert counted(store) == {}


def test_two_arrays_with_the_same_environment_share_it(store):
    store.create(tasks(3))
    store.create(tasks(4, spec={"name": "second"}))
    assert sorted(counted(store).values()) == [3, 4, 7] and counted(store) == held(store)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["create", "update", "end", "prune"]), st.integers(0, 3),
                          st.integers(1, 5)), max_size=12))
def test_the_counts_are_the_rows_that_hold_each_text_after_any_writes(tmp_path_factory, steps):
    store = SqliteStore(tmp_path_factory.mktemp("q") / "queue.db")
    envs = [ENV, {**ENV, "B": "2"}, {"SHORT": "1"}, None]
    specs = [job_record(spec={"name": f"n{i}"}).spec_json for i in range(4)]
    try:
        for clock, (what, pick, n) in enumerate(steps, start=1):
            queued = store.list([S.QUEUED])
            if what == "create":
                made = tasks(n, env=envs[pick])
                store.create([job_record(id="", group="", array_index=j.array_index, submit_env=j.submit_env,
                                         spec_json=specs[pick]) for j in made])
            elif what == "update" and queued:
                store.apply_each([Change(j.id, S.QUEUED, None, "u", clock, {"spec_json": specs[pick]})
                                  for j in queued[:n]])
            elif what == "end" and queued:
                store.apply_each([Change(j.id, S.QUEUED, S.CANCELLED, "c", clock, {"ended_at": float(clock)})
                                  for j in queued[:n]])
            elif what == "prune":
                store.prune_history(before=float(clock), batch=n)
            assert counted(store) == held(store)
            assert all(j.spec_json in specs for j in store.list())
    finally:
        store.close()


def test_a_version_6_file_reads_its_rows_and_its_notices_read_the_kept_spec(tmp_path):
    path = tmp_path / "queue.db"
    store = SqliteStore(path)
    NoticeOutbox(path).close()        # the outbox and its trigger, as a daemon that ran made them
    [inline] = store.create([job_record(id="", group="", submit_env=ENV)])
    store.close()
    left_at_version(    # texts in the rows, no texts table, the notices' trigger reading the row
        path, 6, *(f"DROP TRIGGER {trigger}" for trigger in ("texts_held", "texts_moved", "texts_released",
                                                             "notices_of_moves")),
        ("UPDATE jobs SET spec_json = ?, submit_env = ?", (inline.spec_json, json.dumps(ENV))),
        "DROP TABLE texts",
        """CREATE TRIGGER notices_of_moves AFTER INSERT ON history BEGIN
        INSERT INTO notices (key, job_id, at, kind) SELECT 'old', NEW.job_id, 0, 'job'
        FROM jobs AS j WHERE j.id = NEW.job_id AND instr(j.spec_json, '"notify":{') > 0; END""")

    store = SqliteStore(path)
    try:
        assert store._meta("schema_version") == str(SCHEMA_VERSION)
        again = store.get(inline.id)
        assert again.submit_env == ENV and again.spec_json == inline.spec_json     # the row's own texts
        # a job written now holds keys, and its moves still reach the outbox (the trigger was replaced)
        [job] = store.create([job_record(id="", group="", spec={"notify": {"events": ["all"], "to": "a@b.c"}})])
        assert store.db.execute("SELECT spec_json FROM jobs WHERE id = ?", (job.id,)).fetchone()[0][0] == KEY_MARK
        store.apply([Change(job.id, S.QUEUED, S.CANCELLED, "cancelled", 1.0, {"ended_at": 1.0})])
        keys = [k for (k,) in store.db.execute("SELECT key FROM notices")]
        assert keys == [f"{job.id}.0.cancelled"]
    finally:
        store.close()



def test_writers_on_one_queue_at_once_keep_the_counts(tmp_path):
    # several processes on one queue (the daemon, users' commands): each its own connection
    path = tmp_path / "queue.db"
    SqliteStore(path).close()
    barrier, errors = threading.Barrier(4), []

    def write(k: int) -> None:
        store = SqliteStore(path)
        try:
            barrier.wait()
            for round in range(5):
                made = store.create(tasks(20, spec={"name": f"w{k % 2}-{round % 2}"}))   # texts met by others
                store.apply_each([Change(j.id, S.QUEUED, S.CANCELLED, "c", 1.0, {"ended_at": 1.0})
                                  for j in made[:10]])
                store.prune_history(before=2.0, batch=7)
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = SqliteStore(path)
    try:
        assert errors == []
        rows = len(store.list())
        assert counted(store) == held(store) and rows >= 4 * 5 * 10
        env_key = KEY_MARK + hashlib.sha256(json.dumps(ENV).encode()).hexdigest()
        assert counted(store)[env_key] == rows            # every writer's every task shares the one text
    finally:
        store.close()


def test_a_groups_transitions_are_read_500_tasks_to_a_query(store):
    # a query a task made `gqa status` of a 100,000-task array 100,000 queries
    made = store.create([replace(j, history=(Transition(S.SUBMITTED, 0.0, "submitted"),
                                             Transition(S.QUEUED, 0.0, "admitted"))) for j in tasks(1_200)])
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    try:
        whole = store.resolve(made[0].group)
    finally:
        store.db.set_trace_callback(None)
    assert sum("FROM history" in s for s in statements) == 3
    assert [len(j.history) for j in whole] == [2] * 1_200 and whole[-1].history[1].reason == "admitted"
    assert whole[7].submit_env == ENV
