"""How few calls the DynamoDB store makes, and that saving them changes no
answer: the settings in one Query, kept for settings_ttl; a pass's reads once
each and in step with the store's own writes; apply() planned from items the
store has just seen, with the revision guard catching a stale one."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws import views
from gqa.adapters.aws.dynamodb_store import KNOWN_FOR, DynamoDBStore
from gqa.adapters.aws.tables import CHANGE_SHARDS, PASS_ATTRIBUTES, PASS_INDEX, TableNames
from gqa.models.errors import Conflict
from gqa.models.job import JobState, Request
from gqa.ports import Change, Inventory
from gqa.scheduling import Policy, TeamPolicy
from gqa.scheduling.budget import period_of
from gqa.services.quota import QuotaService
from tests.aws.deployed import create_tables
from tests.aws.moto_support import session
from tests.aws.test_dynamodb_store import ops, record_calls
from tests.builders import gpus
from tests.contract.conftest import FAKE_AWS
from tests.contract.jobs import T0, new_job, put
from tests.services.fakes import FakeClock

pytestmark = pytest.mark.aws
S = JobState
HOUR = 3600.0
NAMES = TableNames.prefixed("gqa-reads-")


@pytest.fixture
def clock():
    """The caches' clock (views.monotonic), moved by the test."""
    fake = FakeClock(100.0)
    with mock.patch.object(views, "monotonic", fake.now):
        yield fake


@pytest.fixture
def make_store(clock):
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        yield lambda **kwargs: DynamoDBStore(session().client("dynamodb"), NAMES, **kwargs)


@pytest.fixture
def store(make_store) -> DynamoDBStore:
    return make_store()


def tables(calls) -> list[str]:
    return [p.get("IndexName") or p["TableName"] for _, p in calls]


# -- settings ---------------------------------------------------------------------------------

def test_inventory_policy_and_teams_are_each_one_query_of_the_settings_partition(store):
    store.set_inventory(Inventory(gpus=gpus(2)))
    store.set_team("vision", TeamPolicy(max_gpus=4))
    calls = record_calls(store)

    store.inventory(), store.policy(), store.teams()

    assert ops(calls) == ["Query"] * 3
    assert {p["KeyConditionExpression"] for _, p in calls} == {"#n0 = :v0"}
    assert tables(calls) == [NAMES.settings] * 3


def test_settings_are_kept_for_their_ttl_and_a_write_of_ones_own_is_seen_at_once(make_store, clock):
    store, other = make_store(settings_ttl=30), make_store()
    store.set_inventory(Inventory(gpus=gpus(2)))
    calls = record_calls(store)

    assert (store.inventory(), store.policy(), store.teams()) == (Inventory(gpus=gpus(2)), Policy(), {})
    other.set_team("vision", TeamPolicy(max_gpus=4))
    assert store.teams() == {}                                  # kept: another's write shows after the ttl
    clock.advance(31)
    assert store.teams() == {"vision": TeamPolicy(max_gpus=4)}
    store.set_policy(Policy(half_life=HOUR))
    assert store.policy() == Policy(half_life=HOUR)             # its own write: read again at once

    assert ops(calls) == ["Query", "Query", "UpdateItem", "Query"]


def test_a_quota_change_reads_the_setting_as_stored_now_never_the_kept_copy(make_store, clock):
    """A warm api function keeps the settings for their ttl: a change made from that copy would
    write back what another function changed since."""
    store, other = make_store(settings_ttl=30), make_store()
    assert store.teams() == {} and store.policy() == Policy()   # read, and kept
    QuotaService(other).set("vision", max_gpus=4)
    QuotaService(other).set_policy(half_life=HOUR)

    assert QuotaService(store).set("vision", budget=101) == TeamPolicy(max_gpus=4, budget=101.0)
    QuotaService(store).set_policy(max_gpus_per_job=2)

    assert other.teams() == {"vision": TeamPolicy(max_gpus=4, budget=101.0)}
    assert other.policy() == Policy(half_life=HOUR, max_gpus_per_job=2)


def test_runtime_samples_are_kept_for_their_ttl(make_store, clock):
    store = make_store(samples_ttl=300)
    put(store, S.SUCCEEDED, team="vision", fields={"started_at": T0, "ended_at": T0 + 30}, wall_time=60)
    calls = record_calls(store)

    assert store.runtime_samples() == store.runtime_samples() == [("vision", 30.0, 60.0)]
    put(make_store(), S.SUCCEEDED, team="nlp", fields={"started_at": T0, "ended_at": T0 + 6}, wall_time=60)
    clock.advance(301)
    assert store.runtime_samples() == [("nlp", 6.0, 60.0), ("vision", 30.0, 60.0)]

    assert ops(calls) == ["Query", "Query"]


# -- a pass -------------------------------------------------------------------------------------

@pytest.fixture
def busy(store) -> DynamoDBStore:
    """A queue with a job in every state a pass looks at, settings, and a ledger."""
    store.set_inventory(Inventory(gpus=gpus(4)))
    store.set_policy(Policy(half_life=HOUR))
    store.set_team("vision", TeamPolicy(max_gpus=4))
    done = put(store, S.RUNNING, team="vision", fields={"started_at": T0})
    store.apply([Change(done.id, S.RUNNING, S.SUCCEEDED, "done", T0 + 60, usage=60.0, cost=0.5)])
    put(store, S.QUEUED, spec={"priority": "low"})
    put(store, S.QUEUED, spec={"priority": "high"})
    put(store, S.HELD)
    put(store, S.RUNNING, team="vision", fields={"started_at": T0, "request": Request.CANCEL})
    put(store, S.STARTING)
    put(store, S.RETRY_WAIT, fields={"not_before": T0 + 5})
    put(store, S.RETRY_WAIT, fields={"not_before": T0 + 500})
    return store


def columns(records) -> list[dict]:
    """What a pass's records hold: the scheduling columns (in a pass, the changes index's projection)."""
    return [{k: getattr(r, k) for k in ("id", *PASS_ATTRIBUTES) if hasattr(r, k)} for r in records]


def everything(store: DynamoDBStore) -> tuple:
    """What a pass asks, in the dispatcher's order."""
    return (columns(store.due_retries(T0 + 10)), columns(store.list([S.RUNNING])), columns(store.with_requests()),
            store.scheduling_view(), store.inventory(), store.policy(), store.teams(), store.usage(T0 + 100, HOUR),
            store.spend(period_of(T0)), store.next_wakeup(), store.list([S.STARTING], history=True))


def test_a_pass_reads_the_live_jobs_the_ledger_and_the_settings_once_each(busy):
    outside = everything(busy)
    calls = record_calls(busy)

    with busy.pass_reads():
        inside = everything(busy)
        everything(busy)

    assert inside == outside                         # the same answers
    # a Query a shard of the pass index; the STARTING job's history comes with its whole item,
    # the one this store wrote a moment ago
    assert sorted(tables(calls)) == sorted([PASS_INDEX] * CHANGE_SHARDS + [NAMES.ledger, NAMES.settings])
    assert ops(calls) == ["Query"] * (CHANGE_SHARDS + 2)
    everything(busy)                                 # after the pass, reads are fresh again
    assert len(calls) > 3


def test_in_a_pass_the_stores_own_writes_are_seen(busy):
    with busy.pass_reads():
        [due] = busy.due_retries(T0 + 10)
        busy.apply([Change(due.id, S.RETRY_WAIT, S.QUEUED, "back in the queue", T0 + 10)])
        pending, _ = busy.scheduling_view()
        head = pending[0].id
        [claimed] = busy.apply([Change(head, S.QUEUED, S.STARTING, "assigned", T0 + 11, {"assigned": (0,)})])
        busy.apply([Change(head, S.STARTING, S.RUNNING, "started", T0 + 12, {"started_at": T0 + 12}),
                    Change(head, S.RUNNING, S.FAILED, "exit 1", T0 + 20, usage=8.0, cost=0.25)])
        inside = everything(busy)

    assert due.id in [p.id for p in pending]
    assert claimed.state == S.STARTING
    assert inside == everything(busy)                # as a fresh read sees them
    assert busy.spend(period_of(T0)) == {"default": 0.25, "vision": 0.5}


# -- apply from what the store has seen -----------------------------------------------------------

def test_a_change_right_after_a_read_reads_nothing_more(make_store):
    store = make_store()
    [job] = make_store().create([new_job()])
    store.get(job.id)
    calls = record_calls(store)

    [out] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned", T0, {"assigned": (0,)})])

    assert ops(calls) == ["TransactWriteItems"]
    assert out == store.get(job.id)


def test_a_stale_remembered_item_costs_a_retry_never_a_lost_update(make_store):
    store, other = make_store(), make_store()
    [job] = store.create([new_job()])
    other.apply([Change(job.id, S.QUEUED, None, "", T0, {"reclaims": 2})])
    calls = record_calls(store)

    [out] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned", T0 + 1, {"assigned": (0,)})])

    assert ops(calls) == ["TransactWriteItems", "BatchGetItem", "TransactWriteItems"]
    assert (out.state, out.assigned, out.reclaims) == (S.STARTING, (0,), 2)
    assert out == store.get(job.id)


def test_a_remembered_item_in_another_state_is_read_again_before_a_conflict(make_store):
    store, other = make_store(), make_store()
    [job] = store.create([new_job()])                # remembered QUEUED
    other.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned", T0, {"assigned": (1,)})])

    [out] = store.apply([Change(job.id, S.STARTING, S.RUNNING, "started", T0 + 1)])
    assert out.state == S.RUNNING
    other.apply([Change(job.id, S.RUNNING, S.CANCELLED, "cancelled", T0 + 2)])
    with pytest.raises(Conflict):
        store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", T0 + 3)])
    assert store.get(job.id).state == S.CANCELLED


def test_remembered_items_are_trusted_only_for_a_few_seconds(make_store, clock):
    store = make_store()
    [job] = store.create([new_job()])
    clock.advance(KNOWN_FOR + 1)
    calls = record_calls(store)

    store.apply([Change(job.id, S.QUEUED, S.HELD, "over budget", T0)])

    assert ops(calls) == ["BatchGetItem", "TransactWriteItems"]


# -- the caches themselves ----------------------------------------------------------------------

def test_known_items_keep_the_most_recent_and_expire(clock):
    known = views.KnownItems(10, most=2)
    for name in "abc":
        known.remember(name, {"id": name})
    known.remember("b", {"id": "b", "rev": 2})       # seen again: now the newest

    assert [known.recall(n) for n in "abc"] == [None, {"id": "b", "rev": 2}, {"id": "c"}]
    known.forget("c")
    assert known.recall("c") is None
    clock.advance(11)
    assert known.recall("b") is None


@pytest.mark.parametrize("ttl, reads", [(0, 3), (5, 2)])
def test_expiring_reads_again_once_its_ttl_is_out(clock, ttl, reads):
    done: list[int] = []
    value = views.Expiring(ttl)

    def read() -> int:
        done.append(1)
        return len(done)

    value.get(read), value.get(read)
    clock.advance(6)
    assert value.get(read) == reads
