"""The BudgetRecords contract (alert claims, live spend), once per backend.
Each `open_records()` is another connection onto the same records, as two
overlapping ticks would have."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from unittest import mock

import pytest

from gqa.ports import BudgetRecords, LiveSpend
from tests.contract.conftest import FAKE_AWS

T0 = 1_000_000.0
LEASE = 900.0


def _sqlite(tmp_path) -> Iterator[Callable[[], BudgetRecords]]:
    from gqa.adapters.local.budget_records import SqliteBudgetRecords

    opened: list[SqliteBudgetRecords] = []

    def open_one() -> BudgetRecords:
        opened.append(SqliteBudgetRecords(tmp_path / "gqa.db"))
        return opened[-1]
    yield open_one
    for records in opened:
        records.close()


def _dynamodb(tmp_path) -> Iterator[Callable[[], BudgetRecords]]:
    from moto import mock_aws

    from gqa.adapters.aws.budget_ledger import DynamoDBBudgetRecords
    from gqa.adapters.aws.tables import TableNames
    from tests.aws.deployed import create_tables
    from tests.aws.moto_support import SerializedClient, session

    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        names = TableNames.prefixed("gqa-budget-")
        create_tables(session().client("dynamodb"), names)
        yield lambda: DynamoDBBudgetRecords(SerializedClient(session().client("dynamodb")), names)


@pytest.fixture(params=["sqlite", pytest.param("dynamodb", marks=pytest.mark.aws)])
def open_records(request, tmp_path):
    yield from {"sqlite": _sqlite, "dynamodb": _dynamodb}[request.param](tmp_path)


def test_an_alert_is_claimed_by_one_caller_only(open_records):
    first, second = open_records(), open_records()
    token = first.claim("budget#2026-11#vision#80", T0, LEASE)
    assert token is not None
    assert second.claim("budget#2026-11#vision#80", T0 + 1, LEASE) is None
    assert second.sent(["budget#2026-11#vision#80", "budget#2026-11#vision#100"], T0 + 1) == \
        {"budget#2026-11#vision#80"}                           # claimed and within its lease counts as sent
    first.confirm("budget#2026-11#vision#80", token, T0 + 2)
    assert second.claim("budget#2026-11#vision#80", T0 + 10 * LEASE, LEASE) is None   # sent: never again
    assert second.sent(["budget#2026-11#vision#80"], T0 + 10 * LEASE) == {"budget#2026-11#vision#80"}


def test_a_released_claim_can_be_claimed_again(open_records):
    first, second = open_records(), open_records()
    token = first.claim("pending#12", T0, LEASE)
    first.release("pending#12", token)
    assert second.sent(["pending#12"], T0) == set()
    assert second.claim("pending#12", T0 + 1, LEASE) is not None


def test_an_unconfirmed_claim_is_taken_over_after_its_lease(open_records):
    first, second = open_records(), open_records()
    stale = first.claim("idle#7#1", T0, LEASE)           # its tick died before sending
    assert second.sent(["idle#7#1"], T0 + LEASE + 1) == set()
    fresh = second.claim("idle#7#1", T0 + LEASE + 1, LEASE)
    assert fresh is not None and fresh != stale
    first.release("idle#7#1", stale)                     # the late tick cannot undo the new claim
    first.confirm("idle#7#1", stale, T0 + LEASE + 2)
    assert first.claim("idle#7#1", T0 + LEASE + 3, LEASE) is None
    second.confirm("idle#7#1", fresh, T0 + LEASE + 4)
    assert first.sent(["idle#7#1"], T0 + 100 * LEASE) == {"idle#7#1"}


def test_sent_of_many_keys(open_records):
    records = open_records()
    keys = [f"pending#{i}" for i in range(250)]          # more than one read batch
    for key in keys[::2]:
        records.confirm(key, records.claim(key, T0, LEASE), T0)
    assert records.sent(keys, T0 + 10 * LEASE) == set(keys[::2])
    assert records.sent([], T0) == set()


def test_live_spend_is_replaced_and_never_steps_back(open_records):
    first, second = open_records(), open_records()
    first.record_spend("2026-11", [LiveSpend("vision", 10.0, 2.5, T0), LiveSpend("nlp", 1.0, 0.0, T0)])
    second.record_spend("2026-11", [LiveSpend("vision", 10.0, 4.0, T0 + 60)])
    first.record_spend("2026-11", [LiveSpend("vision", 10.0, 3.0, T0 + 30)])   # an older tick, finishing late
    assert first.live_spend("2026-11") == {"vision": LiveSpend("vision", 10.0, 4.0, T0 + 60),
                                           "nlp": LiveSpend("nlp", 1.0, 0.0, T0)}
    assert second.live_spend("2026-12") == {}
    assert first.live_spend("2026-11")["vision"].amount == 14.0


# -- the team policy and queue policy fields the watch reads, through the JobStore ---------------------

def test_stop_at_budget_and_alert_settings_are_kept_by_the_store(store):
    from dataclasses import replace

    from gqa.scheduling import TeamPolicy

    store.set_team("vision", TeamPolicy(budget=1000.0, stop_at_budget=True))
    store.set_team("nlp", TeamPolicy(budget=10.0))
    assert store.teams()["vision"] == TeamPolicy(budget=1000.0, stop_at_budget=True)
    assert store.teams()["nlp"].stop_at_budget is False
    policy = replace(store.policy(), alert_pending_after=None, budget_alerts=(75.0, 100.0), idle_gpu_percent=10.0,
                     idle_gpu_window=600.0)
    store.set_policy(policy)
    assert store.policy() == policy


def test_an_older_sqlite_queue_gains_the_stop_at_budget_column(tmp_path):
    from gqa.adapters.local.store import SqliteStore
    from tests.builders import left_at_version

    path = tmp_path / "old.db"
    SqliteStore(path).close()
    left_at_version(path, 1, "DROP TABLE teams",   # the teams table as the first released schema had it
                    "CREATE TABLE teams (team TEXT PRIMARY KEY, share REAL NOT NULL, max_gpus INTEGER, "
                    "max_gpus_per_user INTEGER, budget REAL)",
                    "INSERT INTO teams VALUES ('vision', 2.0, 8, NULL, 500.0)")
    store = SqliteStore(path)
    teams = store.teams()
    assert (teams["vision"].budget, teams["vision"].share, teams["vision"].stop_at_budget) == (500.0, 2.0, False)
    store.close()
