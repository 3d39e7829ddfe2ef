"""A real daemon meets a database that a newer gqa brought to its schema
while it ran (an upgrade without `gqa local stop` first): it stops rather
than misread what the newer version writes, starts nothing more, and leaves
its running job to the new version's daemon."""

import sqlite3
import time

import pytest

from gqa.adapters.local.store import SCHEMA_VERSION

from .conftest import pid_alive

pytestmark = pytest.mark.e2e


def test_a_daemon_stops_once_a_newer_gqa_brought_its_database_up(make_queue):
    queue = make_queue(gpus=1)
    [first] = queue.submit(["sleep", "1"])
    [second] = queue.submit(["true"])
    queue.wait(first, ("RUNNING",))
    newer = sqlite3.connect(queue.home / "gqa.db")
    newer.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    newer.commit()
    # the first job's exit wakes the daemon: its pass reads the schema and it stops
    deadline = time.monotonic() + 30
    while pid_alive(queue.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(queue.pid)
    log = (queue.home / "daemon.log").read_text()
    assert f"stopping: {queue.home / 'gqa.db'} was brought to schema {SCHEMA_VERSION + 1} by a newer gqa" in log
    states = dict(newer.execute("SELECT id, state FROM jobs"))
    assert states[second] == "QUEUED"                   # never started by the older daemon
    assert newer.execute("SELECT attempts FROM jobs WHERE id = ?", (second,)).fetchone()[0] == 0
    newer.close()
