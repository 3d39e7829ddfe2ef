"""The DynamoDB JobStore beyond the contract (tests/contract runs that on
moto too): which API calls it makes, how it retries, how it reports a lost
race, and the parts of its table design the contract cannot see."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from botocore.exceptions import ClientError

from gqa.adapters.aws import errors, ledger, writes
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.tables import CHANGE_SHARDS, JOBS, PASS_INDEX, TableNames
from gqa.models.errors import BackendUnavailable, Conflict, Misconfigured
from gqa.models.job import JobState, Request
from gqa.ports import Change
from gqa.scheduling import Policy
from tests.aws.deployed import moto_tables
from tests.aws.moto_support import session
from tests.contract.jobs import T0, new_job, put

pytestmark = pytest.mark.aws
S = JobState
HOUR = 3600.0
NAMES = TableNames.prefixed("gqa-unit-")


@pytest.fixture
def aws():
    with moto_tables(NAMES):
        yield


@pytest.fixture
def make_store(aws):
    """A store on its own client; `sleeps` collects the backoff it asked for."""
    def make(**kwargs) -> DynamoDBStore:
        sleeps: list[float] = []
        store = DynamoDBStore(session().client("dynamodb"), NAMES, sleep=sleeps.append, **kwargs)
        store.sleeps = sleeps  # type: ignore[attr-defined]
        return store
    return make


@pytest.fixture
def store(make_store) -> DynamoDBStore:
    return make_store()


def record_calls(store: DynamoDBStore) -> list[tuple[str, dict]]:
    """(operation, request) of every call the store's client makes from now on,
    as it goes on the wire (DynamoDB speaks JSON)."""
    calls: list[tuple[str, dict]] = []
    store.client.meta.events.register(
        "before-call.dynamodb.*", lambda model, params, **_: calls.append((model.name, json.loads(params["body"]))))
    return calls


def ops(calls) -> list[str]:
    return [name for name, _ in calls]


# -- what it asks DynamoDB ----------------------------------------------------------------

def test_scheduling_view_is_a_query_a_shard_of_the_changes_index_in_scheduling_order(store):
    normal = put(store, S.QUEUED)
    held = put(store, S.HELD)
    high = put(store, S.QUEUED, spec={"priority": "high"})
    low = put(store, S.QUEUED, spec={"priority": "low"})
    put(store, S.RUNNING)
    put(store, S.RETRY_WAIT)
    calls = record_calls(store)

    pending, running = store.scheduling_view()

    assert [p.id for p in pending] == [high.id, normal.id, held.id, low.id]   # tier, then submission
    assert len(running) == 1
    assert ops(calls) == ["Query"] * CHANGE_SHARDS
    assert {c[1]["IndexName"] for c in calls} == {PASS_INDEX}
    assert sorted(c[1]["ExpressionAttributeValues"][":v0"]["S"] for c in calls) == [
        str(n) for n in range(CHANGE_SHARDS)]


def test_no_read_scans_the_table(store):
    for state in (S.QUEUED, S.HELD, S.RUNNING, S.RETRY_WAIT, S.SUCCEEDED):
        put(store, state, fields={"started_at": T0, "ended_at": T0 + 5, "not_before": T0} if state != S.QUEUED
            else None, wall_time=60)
    calls = record_calls(store)

    store.scheduling_view(), store.list(), store.list([S.QUEUED], team="default", limit=1)
    store.list(history=True), store.resolve("1"), store.with_requests(), store.due_retries(T0)
    store.next_wakeup(), store.runtime_samples(), store.usage(T0, HOUR), store.spend("2026-11"), store.teams()

    assert "Scan" not in ops(calls)
    assert {name for name, _ in calls} <= {"Query", "GetItem"}


def test_one_counter_call_and_one_transaction_per_submission(store):
    calls = record_calls(store)

    tasks = store.create([new_job(array_index=i) for i in range(3)])

    assert [t.id for t in tasks] == ["1_0", "1_1", "1_2"]
    assert ops(calls) == ["UpdateItem", "TransactWriteItems"]


def test_jobs_with_reserved_ids_cost_one_transaction_and_a_redelivery_no_read(store):
    reserved = store.reserve_ids([new_job(array_index=i) for i in range(3)])
    store.create(reserved[:1])
    calls = record_calls(store)

    created = store.create(reserved)

    # the first try loses on 1_0 and learns it as stored from the cancellation reasons;
    # the retry writes the other two
    assert ops(calls) == ["TransactWriteItems", "TransactWriteItems"]
    assert [len(p["TransactItems"]) for _, p in calls] == [3, 2]
    assert created == store.list(history=True)


def test_a_fresh_id_that_exists_means_the_counter_went_back(store):
    store.create([new_job()])
    session().client("dynamodb").delete_item(TableName=NAMES.settings, Key={"pk": {"S": "counter"},
                                                                            "sk": {"S": "jobs"}})
    with pytest.raises(Conflict, match="id counter"):
        store.create([new_job()])
    assert len(store.list()) == 1


def test_a_change_with_usage_and_cost_is_one_transaction(store):
    store.set_policy(Policy(half_life=HOUR))
    job = put(store, S.RUNNING, team="vision")
    calls = record_calls(store)

    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", T0, usage=10.0, cost=1.5)])

    writes = [params for name, params in calls if name == "TransactWriteItems"]
    assert [len(p["TransactItems"]) for p in writes] == [3]   # the job, its usage bucket, its spend
    # the settings (for the half-life) and the write: the job was written by this store a moment ago
    assert ops(calls) == ["Query", "TransactWriteItems"]


# -- batches ----------------------------------------------------------------------------------

def test_two_steps_of_one_job_in_one_batch_are_one_update(store):
    [job] = store.create([new_job()])
    calls = record_calls(store)

    out = store.apply([Change(job.id, S.QUEUED, S.STARTING, "go", T0 + 1, {"assigned": (0,)}),
                       Change(job.id, S.STARTING, S.RUNNING, "running", T0 + 2, {"pid": 7})])

    assert [(j.state, j.pid) for j in out] == [(S.STARTING, None), (S.RUNNING, 7)]
    assert out[-1] == store.get(job.id)
    assert [t.state for t in out[-1].history][-2:] == [S.STARTING, S.RUNNING]
    assert ops(calls).count("TransactWriteItems") == 1


def test_usage_of_one_team_from_several_changes_is_merged_into_one_item(store):
    store.set_policy(Policy(half_life=HOUR))
    jobs = [put(store, S.RUNNING, team="vision") for _ in range(3)]

    store.apply([Change(j.id, S.RUNNING, S.SUCCEEDED, "done", T0 + n, usage=10.0, cost=1.0)
                 for n, j in enumerate(jobs)])

    expected = sum(10.0 * 0.5 ** ((T0 + 2 - (T0 + n)) / HOUR) for n in range(3))
    assert store.usage(T0 + 2, HOUR) == {"vision": pytest.approx(expected)}
    assert store.spend("1970-01") == {"vision": 3.0}


@pytest.fixture
def small_transactions(monkeypatch):
    """Transactions of 4 items instead of 100: the same chunking, without 100s of moto writes."""
    monkeypatch.setattr(writes, "MAX_TRANSACTION", 4)


def test_batches_over_a_transaction_are_written_in_chunks(store, small_transactions):
    calls = record_calls(store)
    created = store.create([new_job() for _ in range(6)])

    out = store.apply([Change(j.id, S.QUEUED, S.CANCELLED, "cancelled", T0 + 1) for j in created])

    assert [len(p["TransactItems"]) for name, p in calls if name == "TransactWriteItems"] == [4, 2, 4, 2]
    assert [j.id for j in created] == ["1", "2", "3", "4", "5", "6"]
    assert out == store.list([S.CANCELLED], history=True)


def test_chunks_count_each_ledger_item_once(store, small_transactions):
    store.set_policy(Policy(half_life=HOUR))
    vision = [put(store, S.RUNNING, team="vision") for _ in range(ledger.SHARDS + 1)]
    by_shard: dict[str, list] = {}
    for job in vision:
        by_shard.setdefault(ledger.shard_of(job.id), []).append(job)
    pair = next(jobs for jobs in by_shard.values() if len(jobs) > 1)   # 17 jobs, 16 shards: two share one
    jobs = [*pair[:2], put(store, S.RUNNING, team="nlp")]
    calls = record_calls(store)

    store.apply([Change(j.id, S.RUNNING, S.SUCCEEDED, "done", T0, usage=10.0) for j in jobs])

    # two vision jobs of one shard share one usage item (3 items); nlp's job and bucket would make 5
    assert [len(p["TransactItems"]) for name, p in calls if name == "TransactWriteItems"] == [3, 2]
    assert store.usage(T0, HOUR) == {"vision": pytest.approx(20.0), "nlp": pytest.approx(10.0)}


def test_usage_decays_across_buckets(store):
    store.set_policy(Policy(half_life=HOUR))
    jobs = [put(store, S.RUNNING, team="vision") for _ in range(3)]
    charges = [(T0, 100.0), (T0 + 17 * HOUR, 50.0), (T0 + 40 * HOUR, 25.0)]   # three 16-half-life buckets

    for job, (at, amount) in zip(jobs, charges):
        store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", at, usage=amount)])

    now = T0 + 41 * HOUR
    expected = sum(amount * math.pow(0.5, (now - at) / HOUR) for at, amount in charges)
    assert store.usage(now, HOUR) == {"vision": pytest.approx(expected)}


# -- throttling ---------------------------------------------------------------------------------

def throttle(store: DynamoDBStore, code: str, times: int) -> Counter:
    """Refuse every call `times` times before letting it through; count the refusals."""
    refused: Counter = Counter()
    left = {"n": times}

    def refuse(model, **_):
        if left["n"] > 0:
            left["n"] -= 1
            refused[model.name] += 1
            raise ClientError({"Error": {"Code": code, "Message": "Rate of requests exceeds the allowed throughput."}},
                              model.name)
        left["n"] = times   # the next call is refused afresh
    store.client.meta.events.register("before-call.dynamodb.*", refuse)
    return refused


@pytest.mark.parametrize("code", sorted(errors.THROTTLING))
def test_throttled_calls_are_retried_with_capped_backoff(make_store, code):
    job = put(make_store(), S.RUNNING, team="vision")
    store = make_store(attempts=4, base_delay=0.1, max_delay=0.25)     # one that has not seen the job
    refused = throttle(store, code, times=3)

    [queued] = store.create([new_job()])
    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", T0, usage=5.0)])
    assert store.get(job.id).state == S.SUCCEEDED
    pending, running = store.scheduling_view()
    assert ([p.id for p in pending], running) == ([queued.id], [])

    assert set(refused) >= {"UpdateItem", "TransactWriteItems", "BatchGetItem", "GetItem", "Query"}
    assert all(n % 3 == 0 for n in refused.values())
    caps = [min(0.25, 0.1 * 2 ** i) for i in range(3)] * (sum(refused.values()) // 3)
    assert all(0.0 <= slept <= cap for slept, cap in zip(store.sleeps, caps))
    assert len(store.sleeps) == sum(refused.values())


@pytest.mark.parametrize("call", [
    lambda s: s.create([new_job()]),
    lambda s: s.get("1"),
    lambda s: s.scheduling_view(),
    lambda s: s.apply([Change("1", S.QUEUED, S.STARTING, "go", T0)]),
], ids=["create", "get", "scheduling_view", "apply"])
def test_throttling_that_persists_is_backend_unavailable(make_store, call):
    make_store().create([new_job()])
    store = make_store(attempts=3)
    refused = throttle(store, "ThrottlingException", times=10**6)

    with pytest.raises(BackendUnavailable):
        call(store)

    assert sum(refused.values()) == 3 and len(store.sleeps) == 2


# -- lost races -----------------------------------------------------------------------------------

def before_first(store: DynamoDBStore, operation: str, action) -> None:
    """Run `action` once, just before the store's first `operation` reaches DynamoDB."""
    done = []

    def hook(**_):
        if not done:
            done.append(True)
            action()
    store.client.meta.events.register(f"before-call.dynamodb.{operation}", hook)


def test_a_state_change_between_read_and_write_is_a_conflict(make_store):
    store, other = make_store(), make_store()
    [job] = store.create([new_job()])
    before_first(store, "TransactWriteItems",
                 lambda: other.apply([Change(job.id, S.QUEUED, S.CANCELLED, "cancelled by user", T0 + 1)]))
    answers: list[dict] = []
    store.client.meta.events.register("after-call.dynamodb.TransactWriteItems",
                                      lambda parsed, **_: answers.append(parsed))

    with pytest.raises(Conflict):
        store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned", T0 + 2, {"assigned": (0,)})])

    # DynamoDB refused the write on its condition; the adapter read the reason, not the message
    assert answers[0]["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in answers[0]["CancellationReasons"]] == ["ConditionalCheckFailed"]
    after = store.get(job.id)
    assert (after.state, after.assigned, after.history[-1].reason) == (S.CANCELLED, (), "cancelled by user")


def test_a_field_change_between_read_and_write_is_merged_not_lost(make_store):
    store, other = make_store(), make_store()
    job = put(store, S.RUNNING)
    before_first(store, "TransactWriteItems",
                 lambda: other.apply([Change(job.id, S.RUNNING, None, "", T0 + 1, {"request": Request.CANCEL})]))

    [out] = store.apply([Change(job.id, S.RUNNING, None, "", T0 + 2, {"kill_reason": "timeout"})])

    assert (out.request, out.kill_reason) == (Request.CANCEL, "timeout")
    assert out == store.get(job.id)
    assert store.with_requests() == []   # the sparse index key follows both fields


# -- error translation -----------------------------------------------------------------------------

def client_error(code: str, reasons: list[str] | None = None, message: str = "whatever") -> ClientError:
    response: dict = {"Error": {"Code": code, "Message": message}}
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, "TransactWriteItems")


@pytest.mark.parametrize("error, transient, domain", [
    (client_error("ConditionalCheckFailedException", message="throttled"), False, Conflict),
    (client_error("TransactionCanceledException", ["None", "ConditionalCheckFailed"]), False, Conflict),
    (client_error("TransactionCanceledException", ["ConditionalCheckFailed", "ThrottlingError"]), False, Conflict),
    (client_error("TransactionCanceledException", ["None", "TransactionConflict"]), True, BackendUnavailable),
    (client_error("TransactionCanceledException", ["ThrottlingError"], message="ConditionalCheckFailed"),
     True, BackendUnavailable),
    (client_error("ProvisionedThroughputExceededException"), True, BackendUnavailable),
    (client_error("TransactionConflictException"), True, BackendUnavailable),   # a write met a transaction
    (client_error("ResourceNotFoundException"), False, BackendUnavailable),
    (client_error("AccessDeniedException"), False, Misconfigured),   # a deployment to mend
    (client_error("ValidationException", message="The conditional request failed"), False, BackendUnavailable),
])
def test_errors_are_judged_by_code_and_reasons_never_by_message(error, transient, domain):
    assert errors.is_transient(error) is transient
    assert isinstance(errors.translate(error, "TransactWriteItems"), domain)


def test_a_cancelled_transaction_says_which_items_lost_their_condition():
    lost = errors.translate(client_error("TransactionCanceledException",
                                         ["None", "ConditionalCheckFailed", "TransactionConflict",
                                          "ConditionalCheckFailed"]), "TransactWriteItems")
    assert isinstance(lost, errors.TransactionConflict)
    assert lost.failed == [1, 3]


def test_the_moto_tables_are_the_defined_ones(aws):
    described = session().client("dynamodb").describe_table(TableName=NAMES.jobs)["Table"]
    assert {i["IndexName"] for i in described["GlobalSecondaryIndexes"]} == {i.name for i in JOBS.indexes}
    assert described["KeySchema"] == [{"AttributeName": JOBS.partition.name, "KeyType": "HASH"},
                                      {"AttributeName": JOBS.sort.name, "KeyType": "RANGE"}]
