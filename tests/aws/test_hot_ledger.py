"""The ledger under concurrent settlements, with DynamoDB's transaction
conflicts (transaction_conflicts.py): a team's usage and spend are sharded
items (ledger.py), so settlements of different jobs of one team at once do
not cancel each other past the retry budget, and every charge is counted."""

from __future__ import annotations

import json
import threading

import pytest

from gqa.adapters.aws import items as it
from gqa.adapters.aws import ledger
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.tables import PK, SK, TableNames
from gqa.models.job import JobState
from gqa.ports import Change
from gqa.scheduling import Policy
from tests.aws.aws_limits import LIMITS, PARTITION_WRITE_UNITS_PER_SECOND
from tests.aws.deployed import moto_tables
from tests.aws.moto_support import session
from tests.aws.transaction_conflicts import Conflicts
from tests.contract.jobs import T0, put

pytestmark = pytest.mark.aws
S = JobState
HOUR = 3600.0
NAMES = TableNames.prefixed("gqa-hot-ledger-")
SETTLEMENTS = 50


@pytest.fixture
def aws():
    with moto_tables(NAMES):
        yield


def settle_at_once(jobs, conflicts: Conflicts) -> list[BaseException]:
    """Each job settled by its own store (as concurrent Lambda invocations do), all at once."""
    stores = [DynamoDBStore(conflicts.client(session().client("dynamodb")), NAMES) for _ in jobs]
    start, failures = threading.Barrier(len(jobs)), []

    def settle(store: DynamoDBStore, job) -> None:
        start.wait()
        try:
            store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", T0, usage=10.0, cost=1.5)])
        except BaseException as exc:   # noqa: BLE001 - every failure is the test's finding
            failures.append(exc)

    threads = [threading.Thread(target=settle, args=pair) for pair in zip(stores, jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_fifty_settlements_of_one_team_at_once_are_all_counted(aws):
    setup = DynamoDBStore(session().client("dynamodb"), NAMES)
    setup.set_policy(Policy(half_life=HOUR))
    jobs = [put(setup, S.RUNNING, team="vision") for _ in range(SETTLEMENTS)]
    conflicts = Conflicts()
    LIMITS.reset()

    failures = settle_at_once(jobs, conflicts)

    assert failures == []                                     # no BackendUnavailable, no lost race
    assert {j.state for j in setup.list()} == {S.SUCCEEDED}
    assert setup.usage(T0, HOUR) == {"vision": pytest.approx(10.0 * SETTLEMENTS)}
    assert setup.spend("1970-01") == {"vision": pytest.approx(1.5 * SETTLEMENTS)}
    # no one ledger item took every settlement: each shard took its jobs' share
    shards = {ledger.shard_of(j.id) for j in jobs}
    most = max(sum(ledger.shard_of(j.id) == s for j in jobs) for s in shards)
    assert len(shards) > 8 and conflicts.hottest(NAMES.ledger) == most < SETTLEMENTS
    # the ledger partition: a usage and a spend ADD per settlement, 2 units each (transactional)
    assert LIMITS.write_units[(NAMES.ledger, json.dumps({"S": ledger.PARTITION}))] == 4 * SETTLEMENTS
    assert LIMITS.hottest(NAMES.ledger) <= PARTITION_WRITE_UNITS_PER_SECOND


def test_settlements_on_one_item_conflict_past_the_retry_budget(aws, monkeypatch):
    # the same model with one item per team, as before sharding: what the shards are for
    monkeypatch.setattr(ledger, "SHARDS", 1)
    setup = DynamoDBStore(session().client("dynamodb"), NAMES)
    setup.set_policy(Policy(half_life=HOUR))
    jobs = [put(setup, S.RUNNING, team="vision") for _ in range(SETTLEMENTS)]
    conflicts = Conflicts(hold=0.02)

    failures = settle_at_once(jobs, conflicts)

    assert conflicts.cancelled > SETTLEMENTS
    assert failures and {type(f).__name__ for f in failures} == {"BackendUnavailable"}


def test_unsharded_items_of_earlier_versions_still_count(aws):
    store = DynamoDBStore(session().client("dynamodb"), NAMES)
    store.set_policy(Policy(half_life=HOUR))
    old_usage = {PK: ledger.PARTITION, SK: ledger.USAGE + json.dumps(["vision", HOUR, 0.0]), "team": "vision",
                 "half_life": HOUR, "epoch": 0.0, "total": 7.0 * 2 ** (T0 / HOUR)}
    old_spend = {PK: ledger.PARTITION, SK: ledger.spend_prefix("1970-01") + "vision", "team": "vision",
                 "amount": 2.0}
    for item in (old_usage, old_spend):
        store.client.put_item(TableName=NAMES.ledger, Item=it.dump(it.plain(item)))
    job = put(store, S.RUNNING, team="vision")

    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", T0, usage=10.0, cost=1.5)])

    assert store.usage(T0, HOUR) == {"vision": pytest.approx(17.0)}
    assert store.spend("1970-01") == {"vision": pytest.approx(3.5)}
    with store.pass_reads():                                  # a pass reads them from its one Query
        assert store.spend("1970-01") == {"vision": pytest.approx(3.5)}


@pytest.mark.parametrize("job_id", ["1", "7_3", "123456_99999"])
def test_a_job_charges_one_shard_always(job_id):
    assert ledger.shard_of(job_id) == ledger.shard_of(job_id)
    assert 0 <= int(ledger.shard_of(job_id)) < ledger.SHARDS


def test_job_ids_spread_over_every_shard():
    counts = [sum(ledger.shard_of(str(n)) == f"{s:02d}" for n in range(1, 1601)) for s in range(ledger.SHARDS)]
    assert min(counts) > 60 and max(counts) < 140     # 100 each on average
