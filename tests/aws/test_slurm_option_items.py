"""A job item holds Slurm's scheduling options only when they are set (items
stay small), and the pass index projects them with the job's name."""

from __future__ import annotations

import json

import pytest

from gqa.adapters.aws import items as it
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.tables import CHANGE_SHARDS, ID, JOB_EXPIRES, PASS_INDEX, TableNames
from gqa.models.job import JobState
from gqa.ports import Change
from tests.aws.deployed import moto_tables
from tests.aws.moto_support import session
from tests.contract.jobs import T0, new_job

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-options-")
OPTIONS = ("dependency", "user_hold", "begin", "nice", "exclusive")


@pytest.fixture
def store():
    with moto_tables(NAMES):
        yield DynamoDBStore(session().client("dynamodb"), NAMES)


def stored_item(store: DynamoDBStore, job_id: str) -> dict:
    out = store.client.get_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(job_id)), ConsistentRead=True)
    return it.load(out["Item"])


def pass_index_items(store: DynamoDBStore) -> dict[str, dict]:
    found = {}
    for shard in range(CHANGE_SHARDS):
        out = store.client.query(TableName=NAMES.jobs, IndexName=PASS_INDEX, KeyConditionExpression="#c = :c",
                                 ExpressionAttributeNames={"#c": "chg"},
                                 ExpressionAttributeValues={":c": {"S": str(shard)}})
        found.update({i[ID]: i for i in map(it.load, out["Items"])})
    return found


def test_a_job_without_options_has_no_attribute_for_them(store):
    [job] = store.create([new_job()])
    assert set(OPTIONS).isdisjoint(stored_item(store, job.id))


def test_the_options_set_are_written_and_projected_and_a_cleared_hold_is_removed(store):
    [job] = store.create([new_job(spec={"after": "afterok:1", "hold": True, "begin": T0 + 60, "nice": 7,
                                        "name": "eval", "resources": {"exclusive": True}})])
    item = stored_item(store, job.id)
    assert {k: item[k] for k in OPTIONS} == {"dependency": "afterok:1", "user_hold": True, "begin": T0 + 60,
                                            "nice": 7, "exclusive": True}
    projected = pass_index_items(store)[job.id]
    assert {k: projected[k] for k in (*OPTIONS, "name")} == {k: item[k] for k in (*OPTIONS, "name")}

    store.apply([Change(job.id, JobState.QUEUED, JobState.HELD, "held", T0, {"user_hold": False})])
    assert "user_hold" not in stored_item(store, job.id)


def calls_of(store: DynamoDBStore, *operations: str) -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = []
    for op in operations:
        store.client.meta.events.register(f"before-call.dynamodb.{op}",
                                          lambda params, op=op, **_: calls.append((op, json.loads(params["body"]))))
    return calls


def test_states_of_reads_jobs_by_key_consistently_and_an_ended_job_never_again(store):
    [ended] = store.create([new_job()])
    store.apply([Change(ended.id, JobState.QUEUED, JobState.CANCELLED, "cancelled", T0, {"ended_at": T0})])
    [waiting] = store.create([new_job()])
    calls = calls_of(store, "Query", "BatchGetItem")

    assert store.states_of([ended.id, waiting.id]) == {ended.id: {JobState.CANCELLED: 1},
                                                       waiting.id: {JobState.QUEUED: 1}}
    [(op, body)] = calls   # both by key in one call, strongly consistent, ids, states and expiries only
    asked = body["RequestItems"][NAMES.jobs]
    assert op == "BatchGetItem" and asked["ConsistentRead"] and len(asked["Keys"]) == 2
    assert sorted(asked["ExpressionAttributeNames"].values()) == sorted([ID, "state", JOB_EXPIRES])
    assert store.states_of([ended.id, waiting.id])[ended.id] == {JobState.CANCELLED: 1}
    assert len(calls) == 2 and len(calls[1][1]["RequestItems"][NAMES.jobs]["Keys"]) == 1   # the waiting job only
    assert store.get(waiting.id).spec.command   # a projected read is never kept as the job's item


def test_states_of_250_jobs_is_3_calls_and_an_array_or_an_unknown_name_one_query_more(store):
    jobs = store.create([new_job() for _ in range(250)])
    tasks = store.create([new_job(array_index=i) for i in range(2)])
    calls = calls_of(store, "Query", "BatchGetItem")

    states = store.states_of([j.id for j in jobs])
    assert states == {j.id: {JobState.QUEUED: 1} for j in jobs}
    assert [op for op, _ in calls] == ["BatchGetItem"] * 3   # 100 keys a call; it made 250 Queries
    calls.clear()
    group = tasks[0].group
    assert store.states_of([group, tasks[1].id, "999999"]) == {group: {JobState.QUEUED: 2},
                                                                 tasks[1].id: {JobState.QUEUED: 1}}
    # the task by its key; the group (no item of its own) and the unknown name by a Query each
    assert sorted(op for op, _ in calls) == ["BatchGetItem", "Query", "Query"]
    assert all(body["ConsistentRead"] for op, body in calls if op == "Query")


def test_an_array_still_being_admitted_counts_its_unwritten_tasks_as_submitted(store):
    from gqa.adapters.aws.admissions import DynamoDBAdmissions
    from gqa.ports import AdmissionProgress

    tasks = store.create([new_job(array_index=i) for i in range(3)])
    group = tasks[0].group
    for task in tasks:
        store.apply([Change(task.id, JobState.QUEUED, JobState.CANCELLED, "cancelled", T0, {"ended_at": T0})])
    admissions = DynamoDBAdmissions(store.client, NAMES)
    progress = admissions.begin(AdmissionProgress(group, 10, 0, "", tasks[0].history))

    # 3 written and ended, 10 still to write: never "all ended" while the rest may come
    assert store.states_of([group]) == {group: {JobState.CANCELLED: 3, JobState.SUBMITTED: 10}}
    assert admissions.advance(group, 0, 10, progress.rev, "delivery-1")
    assert store.states_of([group]) == {group: {JobState.CANCELLED: 3}}


def test_states_of_asks_again_for_keys_left_unprocessed_and_gives_up_with_a_clear_error(store):
    from gqa.models.errors import BackendUnavailable

    jobs = store.create([new_job() for _ in range(3)])
    slept: list[float] = []
    store.call.sleep = slept.append
    left = {"calls": 1, "read": 1}

    def throttle(parsed, **_):   # DynamoDB's answer under throttling: some keys returned unread
        if left["calls"] and parsed.get("Responses"):
            left["calls"] -= 1
            items = parsed["Responses"][NAMES.jobs]
            kept, unread = items[:left["read"]], items[left["read"]:]
            parsed["Responses"][NAMES.jobs] = kept
            parsed["UnprocessedKeys"] = {NAMES.jobs: {
                "Keys": [it.dump(it.job_key(it.load(i)[ID])) for i in unread], "ConsistentRead": True,
                "ProjectionExpression": "#i, #s", "ExpressionAttributeNames": {"#i": ID, "#s": "state"}}}

    store.client.meta.events.register("after-call.dynamodb.BatchGetItem", throttle)
    assert store.states_of([j.id for j in jobs]) == {j.id: {JobState.QUEUED: 1} for j in jobs}
    assert len(slept) == 1   # one back-off, then the two unread keys read
    left.update(calls=store.call.attempts, read=0)   # throttled at every call: refused, not a half answer
    with pytest.raises(BackendUnavailable, match="throttling"):
        store.states_of([j.id for j in jobs])
