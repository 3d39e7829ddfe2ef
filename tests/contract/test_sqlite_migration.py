"""A queue file written by the previous schema opens with the current one, its jobs intact."""

import sqlite3

import pytest

from gqa.adapters.local.store import SCHEMA_VERSION, SqliteStore
from gqa.models.errors import QueueMismatch
from gqa.models.job import JobRecord
from gqa.ports import Change
from tests.builders import job_record


def test_a_version_1_file_gains_the_capacity_column(tmp_path):
    path = tmp_path / "queue.db"
    store = SqliteStore(path)
    [job] = store.create([job_record(group="")])
    store.close()
    old = sqlite3.connect(path)      # as the previous release left it: no column, version 1
    old.execute("ALTER TABLE jobs DROP COLUMN capacity_failures")
    old.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    old.commit()
    old.close()

    store = SqliteStore(path)
    try:
        again = store.get(job.id)
        assert isinstance(again, JobRecord) and again.capacity_failures == 0
        assert store._meta("schema_version") == str(SCHEMA_VERSION)
        store.apply([Change(job.id, again.state, None, "", 1.0, {"capacity_failures": 2})])
        assert store.get(job.id).capacity_failures == 2
    finally:
        store.close()


def test_a_version_2_file_gains_team_members_and_keeps_its_teams(tmp_path):
    from gqa.scheduling.snapshot import TeamPolicy

    path = tmp_path / "queue.db"
    store = SqliteStore(path)
    store.set_team("vision", TeamPolicy(share=2.0))
    store.close()
    old = sqlite3.connect(path)      # as version 2 left it: teams without members
    old.execute("ALTER TABLE teams DROP COLUMN members")
    old.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    old.commit()
    old.close()

    store = SqliteStore(path)
    try:
        assert store.team_members() == {} and store.teams() == {"vision": TeamPolicy(share=2.0)}
        store.set_team_members("vision", ("alice",))
        assert store.team_members() == {"vision": ("alice",)}
    finally:
        store.close()


def test_a_version_3_file_gains_the_slurm_options_and_its_jobs_keep_theirs(tmp_path):
    path = tmp_path / "queue.db"
    store = SqliteStore(path)
    [job] = store.create([job_record(group="")])
    store.close()
    old = sqlite3.connect(path)      # as version 3 left it: no dependency, hold, begin, nice or exclusive
    for column in ("dependency", "user_hold", "begin", "nice", "exclusive"):
        old.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
    old.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    old.commit()
    old.close()

    store = SqliteStore(path)
    try:
        again = store.get(job.id)
        assert (again.dependency, again.user_hold, again.begin, again.nice, again.exclusive) == (
            None, False, None, 0, False)
        assert again.spec_json == job.spec_json
        store.apply([Change(job.id, again.state, None, "", 1.0, {"user_hold": True, "begin": 5.0})])
        assert (store.get(job.id).user_hold, store.get(job.id).begin) == (True, 5.0)
    finally:
        store.close()


def test_a_reader_kept_open_stops_reading_once_a_newer_gqa_brought_the_schema_up(tmp_path):
    # the daemon keeps its store open across an upgrade: rows a newer gqa writes it may misread
    path = tmp_path / "queue.db"
    store = SqliteStore(path)
    try:
        store.create([job_record(group="", id=""), job_record(group="", id="")])
        assert len(store.scheduling_view()[0]) == 2
        newer = sqlite3.connect(path)
        newer.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
        newer.commit()
        newer.close()
        for read in (store.scheduling_view, lambda: store.scheduling_feed(None)):
            with pytest.raises(QueueMismatch, match=f"brought to schema {SCHEMA_VERSION + 1} by a newer gqa"):
                read()
    finally:
        store.close()
