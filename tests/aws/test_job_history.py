"""A job item's size stays bounded whatever happens to the job: older
transitions move to history items (gqa/adapters/aws/history.py), status
still shows them all, listing and the pass never read them, and one job
DynamoDB refuses does not stop the others being written."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from botocore.exceptions import ClientError

from gqa.adapters.aws import history, writes
from gqa.adapters.aws import items as it
from gqa.adapters.aws.dynamodb_store import MAX_SUBMITTED_BYTES, DynamoDBStore, JobRefused
from gqa.adapters.aws.tables import TableNames
from gqa.models.errors import Conflict, Rejected
from gqa.models.job import JobState, Transition
from gqa.ports import Change
from gqa.services.settle import apply_holding
from tests.aws.deployed import moto_tables
from tests.aws.moto_support import session
from tests.contract.jobs import T0, new_job, put

pytestmark = pytest.mark.aws
S = JobState
NAMES = TableNames.prefixed("gqa-history-")
# QUEUED -> ... -> QUEUED: the loop of a job requeued, reclaimed or retried without end
CYCLE = (S.STARTING, S.RUNNING, S.RETRY_WAIT, S.QUEUED)
HOLDS = (S.HELD, S.QUEUED)   # held and released by its team's budget, over and over


@pytest.fixture
def aws():
    with moto_tables(NAMES):
        yield


@pytest.fixture
def store(aws) -> DynamoDBStore:
    return DynamoDBStore(session().client("dynamodb"), NAMES)


def raw_item(job_id: str) -> dict:
    out = session().client("dynamodb").get_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(job_id)),
                                                 ConsistentRead=True)
    return it.load(out["Item"])


def history_items(job_id: str) -> list[dict]:
    pages = session().client("dynamodb").get_paginator("query").paginate(
        TableName=NAMES.jobs, KeyConditionExpression="#g = :g", ExpressionAttributeNames={"#g": "grp"},
        ExpressionAttributeValues={":g": {"S": history.partition(job_id)}}, ConsistentRead=True)
    return [it.load(i) for page in pages for i in page["Items"]]


def steps(job, n: int, first: int, reason: str = "", loop: tuple = CYCLE) -> list[Change]:
    """The next `n` transitions of `loop`, from the job's state; reasons name their number."""
    out, state = [], job.state
    for k in range(first, first + n):
        to = loop[(loop.index(state) + 1) % len(loop)]
        out.append(Change(job.id, state, to, f"step {k}{reason}", T0 + k))
        state = to
    return out


def walk(store: DynamoDBStore, job, to: int, reason: str = "") -> tuple[object, list[int]]:
    """Move the job through transitions until it has `to`: one per write first (a move every
    KEEP), then many per write (several history items at once). The item's size after each write."""
    done, sizes = len(job.history), []
    while done < to:
        n = 1 if done < 100 else min(1000, to - done)
        [job] = store.apply(steps(job, n, done, reason))[-1:]
        done += n
        item = raw_item(job.id)
        sizes.append(history.item_bytes(item))
        assert len(item["history"]) <= history.MOST
    return job, sizes


@pytest.mark.slow
def test_a_job_through_10000_transitions_keeps_a_small_item_and_status_shows_them_all(store):
    job, sizes = walk(store, put(store, S.QUEUED), 10_000)

    assert max(sizes) < 8 * 1024
    whole = store.get(job.id)
    assert len(whole.history) == 10_000
    assert [h.state for h in whole.history[:2]] == [S.SUBMITTED, S.QUEUED]
    assert [h.reason for h in whole.history[2:]] == [f"step {k}" for k in range(2, 10_000)]
    assert [h.at for h in whole.history[2:]] == [T0 + k for k in range(2, 10_000)]
    assert store.resolve(job.group) == [whole]
    item = raw_item(job.id)
    assert sum(len(i[history.TRANSITIONS]) for i in history_items(job.id)) == item[history.MOVED] == 10_000 - len(
        item["history"])


def test_the_largest_job_item_stays_under_the_ceiling(store):
    # the fixed part at its limit (a large environment) and every reason over the cut: the worst item
    job = put(store, S.QUEUED, submit_env={"BIG": "e" * (MAX_SUBMITTED_BYTES - 2_000)})
    assert history.fixed_bytes(raw_item(job.id)) > MAX_SUBMITTED_BYTES - 2_000   # about as large as it may be
    job, sizes = walk(store, job, 500, " " + "r" * 3000)

    assert max(sizes) <= history.ITEM_CEILING < 400 * 1000
    whole = store.get(job.id)
    assert [h.reason.split(" ")[1] for h in whole.history[2:]] == [str(k) for k in range(2, 500)]
    assert all(len(h.reason.encode()) <= history.MAX_REASON_BYTES for h in whole.history)


def test_listing_and_the_pass_never_read_moved_history(store):
    job = put(store, S.QUEUED)
    [job] = store.apply(steps(job, 60, 2))[-1:]
    other = put(store, S.QUEUED)
    assert history_items(job.id)
    calls: list[dict] = []
    store.client.meta.events.register("before-call.dynamodb.Query",
                                      lambda params, **_: calls.append(json.loads(params["body"])))

    listed = store.list(history=True)
    pending, _ = store.scheduling_view()
    arrays = store.resolve(job.group, history=False) + store.resolve(other.group, history=False)

    assert [j.id for j in listed] == [job.id, other.id] == [p.id for p in pending] == [j.id for j in arrays]
    assert not any("#history" in json.dumps(c) for c in calls)
    # the item's own recent part, newest last: what services look back on
    assert listed[0].history[-1] == Transition(job.state, T0 + 61, "step 61")
    assert history.KEEP <= len(listed[0].history) <= history.MOST


def test_a_write_planned_on_a_stale_item_moves_each_transition_once(aws):
    first, second = (DynamoDBStore(session().client("dynamodb"), NAMES) for _ in range(2))
    job = put(first, S.QUEUED)
    [job] = first.apply(steps(job, history.MOST - 2, 2, loop=HOLDS))[-1:]   # full: the next write moves
    second.get(job.id)                                                      # second remembers it as it is now
    tries = []
    second.client.meta.events.register("before-call.dynamodb.TransactWriteItems", lambda **_: tries.append(1))

    [job] = first.apply(steps(job, 2, history.MOST, loop=HOLDS))[-1:]    # back to QUEUED, the oldest moved
    # second plans from its remembered item (QUEUED as expected) the same move: the job's revision and
    # the history item's key both refuse it, and the change is planned again from a fresh read
    second.apply(steps(job, 1, history.MOST + 2, loop=HOLDS))

    assert len(tries) == 2
    whole = first.get(job.id)
    assert [h.reason for h in whole.history[2:]] == [f"step {k}" for k in range(2, history.MOST + 3)]
    assert [len(i[history.TRANSITIONS]) for i in history_items(job.id)] == [history.MOST + 2 - history.KEEP]


def test_a_replayed_transaction_writes_no_second_history_item(store):
    job = put(store, S.QUEUED)
    [job] = store.apply(steps(job, history.MOST - 2, 2))[-1:]
    old = raw_item(job.id)
    [change] = steps(job, 1, history.MOST)
    write = writes.JobWrite(old, it.job_record(old))
    from gqa.models.job import transition
    write.record = transition(write.record, change.to, change.at, change.reason)
    request = writes.transaction(NAMES, {job.id: write})
    assert [next(iter(r)) for r in request] == ["Update", "Put"]

    store._transact(request)
    with pytest.raises(Conflict):
        store._transact(request)   # the same request again, as a redelivered message would make it

    assert len(history_items(job.id)) == 1
    assert len(store.get(job.id).history) == history.MOST + 1


def test_a_history_item_cannot_be_written_twice_even_past_the_job_guard(store):
    job = put(store, S.QUEUED)
    put_chunk = writes.history_put(NAMES.jobs, job.id, 0, history.encode(job.history))
    store._transact([put_chunk])
    with pytest.raises(Conflict):
        store._transact([put_chunk])


@pytest.mark.parametrize("reason, kept", [
    ("exit 1", "exit 1"),
    ("x" * history.MAX_REASON_BYTES, "x" * history.MAX_REASON_BYTES),
    ("x" * (history.MAX_REASON_BYTES + 1), "x" * (history.MAX_REASON_BYTES - 3) + "..."),
    # a character cut in two is left out, not stored half
    ("é" * history.MAX_REASON_BYTES, "é" * ((history.MAX_REASON_BYTES - 3) // 2) + "..."),
])
def test_a_reason_is_cut_to_its_budget(reason, kept):
    assert history.cut(reason) == kept


@pytest.mark.parametrize("moved, held, expect_moved, expect_kept, chunks", [
    (0, 10, 0, 10, []),                                     # short: nothing moves
    (0, history.MOST, 0, history.MOST, []),                # full, not over
    (0, history.MOST + 1, 21, history.KEEP, [(0, 21)]),     # one over: the oldest 21 move, KEEP stay
    (100, history.MOST + 1, 121, history.KEEP, [(100, 21)]),
    (0, 200, 180, history.KEEP, [(0, 64), (64, 64), (128, 52)]),   # many at once: items of CHUNK at most
])
def test_what_moves(moved, held, expect_moved, expect_kept, chunks):
    entries = [{"n": k} for k in range(held)]
    out_moved, kept, out = history.split(moved, entries)
    assert (out_moved, len(kept)) == (expect_moved, expect_kept)
    assert kept == entries[held - expect_kept:]
    assert [(first, len(part)) for first, part in out] == chunks


def test_a_submission_too_large_for_a_job_item_is_refused_before_anything_is_written(store):
    big = new_job(submit_env={"BIG": "e" * MAX_SUBMITTED_BYTES})
    with pytest.raises(Rejected, match="at most 252 KiB"):
        store.reserve_ids([new_job(), big])
    with pytest.raises(Rejected):
        store.create([new_job(), big])
    assert store.list() == []
    assert [j.id for j in store.create([new_job()])] == ["1"]   # no id was handed out


def oversize(job_id: str) -> None:
    """Fill a job's item to within 50 bytes of 400 KB (as an unbounded history once could), so that the
    next write to it is refused: the largest padding DynamoDB (here moto) still takes."""
    client = session().client("dynamodb")
    for size in range(410_000, 380_000, -50):
        try:
            client.update_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(job_id)), UpdateExpression="SET #p = :p",
                               ExpressionAttributeNames={"#p": "padding"},
                               ExpressionAttributeValues={":p": {"S": "p" * size}})
            return
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "ValidationException"
    raise AssertionError("no padding fitted")


def test_a_job_dynamodb_refuses_is_skipped_and_the_others_are_written(store):
    refused, fine = put(store, S.RETRY_WAIT), put(store, S.RETRY_WAIT)
    oversize(refused.id)
    back = [Change(j.id, S.RETRY_WAIT, S.QUEUED, "back in the queue " + "." * 300, T0 + 1) for j in (refused, fine)]
    calls = []
    store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", lambda **_: calls.append(1))

    with pytest.raises(JobRefused, match=f"job {refused.id}") as caught:
        store.apply(back)
    assert isinstance(caught.value, Conflict) and caught.value.job_ids == [refused.id, fine.id]
    assert len(calls) == 1   # refused for its content: not tried again as a lost race would be
    # the services' fallback writes the others one by one
    assert [j.id for j in apply_holding(store, back)] == [fine.id]
    assert store.get(fine.id).state == S.QUEUED and store.get(refused.id).state == S.RETRY_WAIT


def test_the_job_named_in_a_cancelled_transaction_is_the_one_refused(store):
    jobs = [put(store, S.RETRY_WAIT) for _ in range(3)]
    real = store.client.transact_write_items

    def refuse_the_second(**request):
        # as DynamoDB answers an item over 400 KB: a reason per item, in request order
        keys = [it.load(next(iter(r.values())).get("Key", {})).get("id") for r in request["TransactItems"]]
        if jobs[1].id not in keys:
            return real(**request)
        raise ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
                           "CancellationReasons": [{"Code": "ValidationError" if k == jobs[1].id else "None"}
                                                   for k in keys]}, "TransactWriteItems")

    back = [Change(j.id, S.RETRY_WAIT, S.QUEUED, "back", T0 + 1) for j in jobs]
    with mock.patch.object(store.client, "transact_write_items", side_effect=refuse_the_second):
        with pytest.raises(JobRefused) as caught:
            store.apply(back)
        applied = store.apply_each(back)
    assert caught.value.job_ids == [jobs[1].id]
    assert applied == [True, False, True]
    assert [store.get(j.id).state for j in jobs] == [S.QUEUED, S.RETRY_WAIT, S.QUEUED]
