"""The history's index on DynamoDB: a finished job is on it under the UTC day
of its end (and only then), with the TTL its deployment keeps it for; a page
is Queries of that index, a day each, never a Scan; a long window with few
jobs answers in several pages, each reading at most DAYS_A_CALL days."""

from __future__ import annotations

import os
import time
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from gqa.adapters.aws import items as it
from gqa.adapters.aws import tables as t
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.store_history import DAYS_A_CALL
from gqa.models.job import JobState
from gqa.ports import BETWEEN_ATTEMPTS, WAITING_STATES, Change, HistoryQuery
from tests.aws.deployed import create_tables
from tests.aws.moto_support import session
from tests.aws.test_dynamodb_store import ops, record_calls
from tests.contract.conftest import FAKE_AWS
from tests.contract.jobs import put

pytestmark = pytest.mark.aws
S = JobState
DAY = 86_400.0
NAMES = t.TableNames.prefixed("gqa-history-")
END = 1_795_000_000.0     # 2026-11-18 08:26:40 UTC


@pytest.fixture
def make_store():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        yield lambda **kwargs: DynamoDBStore(session().client("dynamodb"), NAMES, **kwargs)


def raw(store, job_id):
    return it.load(store.client.get_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(job_id)))["Item"])


def test_a_finished_job_carries_its_end_day_and_ttl_a_live_one_neither(make_store):
    store = make_store(keep_history=90 * DAY)
    done = put(store, S.SUCCEEDED, at=END, fields={"ended_at": END})
    running = put(store, S.RUNNING, at=END)
    assert raw(store, done.id)[t.END_DAY] == "2026-11-18"
    assert raw(store, done.id)[t.JOB_EXPIRES] == int(END + 90 * DAY) + 1
    assert t.END_DAY not in raw(store, running.id) and t.JOB_EXPIRES not in raw(store, running.id)
    kept = make_store()   # no retention set: kept for good
    forever = put(kept, S.FAILED, at=END, fields={"ended_at": END})
    assert t.END_DAY in raw(kept, forever.id) and t.JOB_EXPIRES not in raw(kept, forever.id)


def test_a_page_queries_the_index_a_day_at_a_time(make_store):
    store = make_store()
    for k in range(3):
        put(store, S.SUCCEEDED, at=END - k * DAY, fields={"ended_at": END - k * DAY})
    calls = record_calls(store)
    jobs, after = store.history(HistoryQuery(since=END - 2 * DAY - 1, until=END + 1, states=frozenset({S.SUCCEEDED})))
    assert [j.ended_at for j in jobs] == [END, END - DAY, END - 2 * DAY] and after is None
    assert set(ops(calls)) == {"Query"}
    assert [p["IndexName"] for _, p in calls] == [t.ENDED_INDEX] * 3   # 18, 17, 16 November
    assert jobs[0].spec_json == "" and jobs[0].history[-1].state == S.SUCCEEDED


def test_a_long_window_with_few_jobs_answers_in_pages_of_days(make_store):
    store = make_store()
    old = put(store, S.SUCCEEDED, at=END - 70 * DAY, fields={"ended_at": END - 70 * DAY})
    query = HistoryQuery(since=END - 100 * DAY, until=END, states=frozenset({S.SUCCEEDED}))
    found, after, pages = [], None, 0
    while True:
        calls = record_calls(store)
        jobs, after = store.history(query, after)
        assert len(calls) <= DAYS_A_CALL
        found += jobs
        pages += 1
        if after is None:
            break
    assert [j.id for j in found] == [old.id] and pages == 4   # 100 days, 31 a call


def test_a_window_that_starts_after_now_reads_nothing_and_asks_no_reversed_range(make_store):
    """Without --until the window ends a day after now; a --since past that end (late tomorrow)
    would be a BETWEEN whose bounds are reversed, which DynamoDB refuses (the limits layer too)."""
    store = make_store()
    now = time.time()
    put(store, S.SUCCEEDED, at=now, fields={"ended_at": now})
    end_of_its_day = (now + DAY) // DAY * DAY + DAY
    later = (now + DAY + end_of_its_day) / 2           # after the window's end, on its last day
    assert store.history(HistoryQuery(since=later, states=frozenset({S.SUCCEEDED}))) == ([], None)
    assert store.history(HistoryQuery(since=now - DAY, states=frozenset({S.SUCCEEDED})))[0][0].ended_at == now
    with pytest.raises(ClientError, match="BETWEEN operator requires upper bound"):
        store.client.query(TableName=NAMES.jobs, IndexName=t.ENDED_INDEX,
                           KeyConditionExpression=f"{t.END_DAY} = :d AND {t.ENDED_AT} BETWEEN :a AND :b",
                           ExpressionAttributeValues={":d": {"S": "2026-11-18"}, ":a": {"N": "2"}, ":b": {"N": "1"}})


def test_jobs_between_attempts_are_read_from_the_pass_index_and_the_pages_by_key(make_store):
    """The queue's jobs are not read whole (by_state's QUEUED partition would): the pass index's
    light entries, a Query a shard, then the page's few jobs by key, as the ended index projects them."""
    store = make_store()
    for _ in range(30):
        put(store, S.QUEUED, at=END)          # never started: not in a history, never read whole
    back = put(store, S.RETRY_WAIT, at=END, fields={"started_at": END - 60, "gpu_seconds": 60.0})
    calls = record_calls(store)
    jobs, after = store.history(HistoryQuery(since=END - DAY, until=END + 1, states=BETWEEN_ATTEMPTS))
    assert [j.id for j in jobs] == [back.id] and after is None
    assert (jobs[0].gpu_seconds, jobs[0].history[-1].state, jobs[0].spec_json) == (60.0, S.RETRY_WAIT, "")
    assert ops(calls) == ["Query"] * t.CHANGE_SHARDS + ["BatchGetItem"]
    assert {p["IndexName"] for op, p in calls if op == "Query"} == {t.PASS_INDEX}
    [keys] = [p["RequestItems"][NAMES.jobs] for op, p in calls if op == "BatchGetItem"]
    assert [k["id"]["S"] for k in keys["Keys"]] == [back.id] and "spec_json" not in keys["ProjectionExpression"]


def test_a_reports_pages_of_jobs_not_started_read_on_from_the_mark_not_the_queue_again(make_store):
    """With `waiting`, a page past the jobs that have started reads each waiting state's by_state
    partition down from the seq of the job the last page stopped at: the pages add up linearly."""
    store = make_store()
    queued = [put(store, S.QUEUED, at=END) for _ in range(25)]
    query = HistoryQuery(since=END - DAY, until=END + 1, waiting=True, limit=10)
    jobs, after = store.history(query)
    assert [j.id for j in jobs] == [j.id for j in queued[::-1][:10]]
    calls = record_calls(store)
    jobs, after = store.history(query, after)
    assert [j.id for j in jobs] == [j.id for j in queued[::-1][10:20]] and after is not None
    assert ops(calls)[0] == "GetItem" and set(ops(calls)[1:]) == {"Query"}     # the mark's seq, then the states
    queries = [p for op, p in calls if op == "Query"]
    assert {p["IndexName"] for p in queries} == {t.BY_STATE}      # no pass index: none of them has started
    down = [p for p in queries if " < " in p["KeyConditionExpression"]]
    assert len(down) == len(WAITING_STATES) == len(queries) - 1    # and the running jobs' partition
    assert all(p["ScanIndexForward"] is False and p["Limit"] <= 10 + 1 for p in down)   # a page and one more


def test_the_index_projections_fit_dynamodbs_limit():
    # DynamoDB allows 100 projected non-key attributes over all of a table's indexes
    assert sum(len(index.include) for index in t.JOBS.indexes) <= 100
    assert set(t.HISTORY_ATTRIBUTES) >= {"gpu_seconds", "cost", "exit_code", "signal", "history", "history_moved"}


def test_a_long_history_expires_with_its_job(make_store):
    from gqa.adapters.aws import history
    from tests.contract.test_long_history import requeue_loop

    store = make_store(keep_history=90 * DAY)
    job = requeue_loop(store, put(store, S.QUEUED, at=END), 150, 2)   # several history items by now
    step = 152
    while job.state != S.RUNNING:
        job, step = requeue_loop(store, job, 1, step), step + 1
    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "exit code 0", END + 300, {"ended_at": END + 300})])
    older = [it.load(i) for i in store.client.query(
        TableName=NAMES.jobs, KeyConditionExpression="grp = :g",
        ExpressionAttributeValues=it.dump({":g": history.partition(job.id)}))["Items"]]
    assert len(older) >= 2 and {i[t.JOB_EXPIRES] for i in older} == {int(END + 300 + 90 * DAY) + 1}
    assert raw(store, job.id)[t.JOB_EXPIRES] == int(END + 300 + 90 * DAY) + 1
    assert len(store.get(job.id).history) > 150   # still whole until then
