"""A finished job that a waiting job names outlives DynamoDB's TTL while it
waits (parents.py), as the local queue's prune keeps it; and one the TTL
deleted all the same is named with no states, so `after`/`afterany` are met
and `afterok`/`afternotok` are cancelled with the reason, not waited on for
ever. TTL deletes an item asynchronously, typically within days of its
expiry: what keeps a parent is its `expires_at` moved on in time."""

from __future__ import annotations

import os
import time
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws import items as it
from gqa.adapters.aws import parents
from gqa.adapters.aws import tables as t
from gqa.adapters.aws.admissions import KEEP_FOR
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.tables import TableNames
from gqa.models.job import JobRecord, JobState
from gqa.scheduling.dependencies import GONE, gate
from tests.aws.deployed import create_tables
from tests.aws.moto_support import session
from tests.builders import job_record, pending, snapshot
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
S = JobState
DAY = 86_400
KEEP = 30 * DAY
NAMES = TableNames("kept-jobs", "kept-settings", "kept-ledger")


@pytest.fixture
def store():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        yield DynamoDBStore(session().client("dynamodb"), NAMES, keep_history=KEEP)


def expiry(store: DynamoDBStore, job_id: str) -> int | None:
    item = it.load(store.client.get_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(job_id)))["Item"])
    return int(item[t.JOB_EXPIRES]) if t.JOB_EXPIRES in item else None


def finished(store: DynamoDBStore, *, state: JobState = S.SUCCEEDED, ended: float) -> JobRecord:
    """A job that ended at `ended`, written as a settlement leaves it (its TTL `KEEP` after its end)."""
    [job] = store.reserve_ids([job_record(state=state, started_at=ended - 60, ended_at=ended, attempts=1)])
    store.client.put_item(TableName=NAMES.jobs, Item=it.dump(it.job_item(job, 1, keep=KEEP)))
    return job


def dependant(store: DynamoDBStore, after: str) -> JobRecord:
    [job] = store.create([job_record(id="", group="", state=S.QUEUED, dependency=after)])
    return job


def test_a_dependant_admitted_on_a_parent_whose_ttl_is_near_keeps_it_the_whole_retention(store):
    now = time.time()
    parent = finished(store, ended=now - KEEP + 3_600)           # an hour of its retention left
    near = expiry(store, parent.id)
    assert near is not None and near < now + 2 * 3_600
    dependant(store, f"afterok:{parent.id}")
    kept = expiry(store, parent.id)
    assert kept is not None and kept >= now + KEEP
    dependant(store, f"afterany:{parent.id}")                     # a second one, or the same message again
    assert expiry(store, parent.id) == kept                      # moved on once: half the retention is left


def test_the_passes_push_it_on_while_its_dependant_waits_and_not_after(store):
    now = time.time()
    parent = finished(store, ended=now - 3_600)
    dependant(store, f"afterok:{parent.id}")
    # 20 days on the dependant still waits (its other parent runs): fewer than half the 30 days are left
    store.client.update_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(parent.id)),
                             UpdateExpression="SET #e = :e", ExpressionAttributeNames={"#e": t.JOB_EXPIRES},
                             ExpressionAttributeValues=it.dump({":e": int(now + 10 * DAY)}))
    dispatcher = DynamoDBStore(session().client("dynamodb"), NAMES, keep_history=KEEP)
    assert dispatcher.states_of([parent.id]) == {parent.id: {S.SUCCEEDED: 1}}
    kept = expiry(store, parent.id)
    assert kept is not None and kept >= now + KEEP
    dispatcher.states_of([parent.id])                             # pushed again only once due
    assert expiry(store, parent.id) == kept
    dispatcher.states_of([])                                      # nothing waits on it: the TTL takes its course
    assert expiry(store, parent.id) == kept


def test_a_parent_not_finished_yet_gets_no_ttl_from_its_dependant(store):
    [parent] = store.create([job_record(id="", group="", state=S.QUEUED)])
    dependant(store, f"afterok:{parent.id}")
    assert expiry(store, parent.id) is None


def test_a_parent_already_gone_is_not_written_back(store):
    parent = finished(store, ended=time.time() - KEEP - DAY)
    store.client.delete_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(parent.id)))   # the TTL's delete
    dependant(store, f"afterok:{parent.id}")
    assert "Item" not in store.client.get_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(parent.id)))


def age_marks(store: DynamoDBStore, days: float) -> None:
    """The id counter's marks as if written `days` ago: their groups were handed out that long ago."""
    counter = it.load(store.client.get_item(TableName=NAMES.settings, Key=it.dump({t.PK: t.COUNTER, t.SK: "jobs"}),
                                            ConsistentRead=True)["Item"])
    marks = {k: v for k, v in counter.items() if k.startswith(parents.MARK)}
    assert marks, "reserve_ids marks the day"
    old = time.time() - days * DAY
    for name in marks:
        store.client.update_item(TableName=NAMES.settings, Key=it.dump({t.PK: t.COUNTER, t.SK: "jobs"}),
                                 UpdateExpression="REMOVE #m SET #o = :v",
                                 ExpressionAttributeNames={"#m": name, "#o": parents.MARK + it.end_day(old)},
                                 ExpressionAttributeValues=it.dump({":v": int(counter["groups"])}))


@pytest.mark.parametrize("kind, verdict", [("after", "met"), ("afterany", "met"),
                                           ("afterok", "never"), ("afternotok", "never")])
def test_a_parent_the_ttl_deleted_all_the_same_is_met_or_cancelled_as_on_the_local_queue(store, kind, verdict):
    parent = finished(store, ended=time.time() - KEEP - DAY)
    child = dependant(store, f"{kind}:{parent.id}")
    store.client.delete_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(parent.id)))
    age_marks(store, KEEP_FOR / DAY + 2)
    named = DynamoDBStore(session().client("dynamodb"), NAMES, keep_history=KEEP).states_of([parent.id])
    assert named == {parent.id: {}}
    decided = gate(snapshot(pending=[pending(child.id, dependency=child.dependency)], named=named))
    if verdict == "met":
        assert child.id not in decided.never and child.id not in decided.told
    else:
        assert decided.never[child.id] == (f"dependency can never be met: job {parent.id} {GONE}, so how it "
                                           f"ended is not known ({kind})")
    assert store.purged(parent.group) == KEEP                      # and a new submission naming it is refused


def test_a_parent_not_admitted_yet_is_waited_for(store):
    """A group handed out lately may be an accepted submission whose intake message is still to come."""
    [parent] = store.reserve_ids([job_record(state=S.QUEUED)])
    age_marks(store, 1)
    assert DynamoDBStore(session().client("dynamodb"), NAMES, keep_history=KEEP).states_of([parent.id]) == {}
    assert store.purged(parent.group) is None
