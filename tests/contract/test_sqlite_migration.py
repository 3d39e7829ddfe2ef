"""A queue file written by the previous schema opens with the current one, its jobs intact."""

import sqlite3

from gqa.adapters.local.store import SCHEMA_VERSION, SqliteStore
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
