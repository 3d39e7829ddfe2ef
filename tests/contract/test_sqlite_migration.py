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
