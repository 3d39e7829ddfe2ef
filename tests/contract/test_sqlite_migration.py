"""A queue file written by the previous schema opens with the current one, its jobs intact."""


import pytest

from gqa.adapters.local.store import SCHEMA_VERSION, SqliteStore
from gqa.models.errors import QueueMismatch
from gqa.models.job import JobRecord
from gqa.ports import Change
from tests.builders import job_record, left_at_version


def test_a_version_1_file_gains_the_capacity_column(tmp_path):
    path = tmp_path / "queue.db"
    store = SqliteStore(path)
    [job] = store.create([job_record(group="")])
    store.close()
    left_at_version(path, 1, "ALTER TABLE jobs DROP COLUMN capacity_failures")   # no column yet

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
    left_at_version(path, 2, "ALTER TABLE teams DROP COLUMN members")   # teams without members

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
    # no dependency, hold, begin, nice or exclusive
    left_at_version(path, 3, *(f"ALTER TABLE jobs DROP COLUMN {column}"
                               for column in ("dependency", "user_hold", "begin", "nice", "exclusive")))

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
        left_at_version(path, SCHEMA_VERSION + 1)     # as a newer gqa's first open leaves it
        for read in (store.scheduling_view, lambda: store.scheduling_feed(None)):
            with pytest.raises(QueueMismatch, match=f"brought to schema {SCHEMA_VERSION + 1} by a newer gqa"):
                read()
    finally:
        store.close()
