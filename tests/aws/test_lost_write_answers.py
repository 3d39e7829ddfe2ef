"""A guarded single-item write whose answer is lost: DynamoDB applied it, the
answer became a 500, and the retry fails its own condition. The caller is
still told it was written, and nothing is applied twice (guarded.py): an
array's decision, an attempt's start, a quota change, an alert's claim."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gqa.adapters.aws import history
from gqa.adapters.aws import items as it
from gqa.adapters.aws import tables as t
from gqa.adapters.aws.admissions import DynamoDBAdmissions
from gqa.adapters.aws.budget_ledger import DynamoDBBudgetRecords, alert_key
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.errors import Retrying
from gqa.adapters.aws.guarded import WRITE_TOKEN, with_token, write_once, written_by
from gqa.adapters.aws.tables import TableNames
from gqa.models.batch_events import BatchJobEvent
from gqa.models.errors import Conflict
from gqa.models.job import JobState, Transition
from gqa.ports import AdmissionProgress, Change
from gqa.services.quota import QuotaService
from gqa.services.reconcile import Action, ReconcileService
from tests.aws.deployed import moto_tables
from tests.aws.moto_support import session
from tests.contract.jobs import T0, new_job

pytestmark = pytest.mark.aws
S = JobState
NAMES = TableNames.prefixed("gqa-lost-")


def no_sleep(_: float) -> None:
    pass


@pytest.fixture
def client():
    with moto_tables(NAMES):
        yield session().client("dynamodb")


def lose_first_answer(client: Any, operation: str, picked: Callable[[dict[str, Any]], bool]) -> list[bool]:
    """The first `operation` `picked` chooses is applied by DynamoDB and answered with a 500."""
    lost: list[bool] = []

    def pick(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["picked"] = picked(params)

    def lose(context: dict[str, Any], **_: Any) -> None:
        if context.get("picked") and not lost:
            lost.append(True)
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "internal"},
                               "ResponseMetadata": {"HTTPStatusCode": 500}}, operation)

    client.meta.events.register(f"before-parameter-build.dynamodb.{operation}", pick)
    client.meta.events.register(f"after-call.dynamodb.{operation}", lose)
    return lost


def guarded_on(table: str) -> Callable[[dict[str, Any]], bool]:
    return lambda params: params["TableName"] == table and "ConditionExpression" in params


def raw(client: Any, table: str, key: dict[str, Any]) -> dict[str, Any]:
    return it.load(client.get_item(TableName=table, Key=it.dump(key), ConsistentRead=True)["Item"])


def test_a_decision_on_an_array_whose_answer_was_lost_is_told_it_was_recorded(client):
    admissions = DynamoDBAdmissions(client, NAMES, sleep=no_sleep)
    queued = Transition(S.QUEUED, T0, "queued")
    admissions.begin(AdmissionProgress("7", total=500, next=100, mover="m", history=(queued,)))
    lost = lose_first_answer(client, "UpdateItem", guarded_on(NAMES.settings))
    held = Transition(S.HELD, T0 + 1, "held by the user")

    assert admissions.decide("7", frozenset({S.QUEUED}), held)

    assert lost
    progress = admissions.progress("7")
    assert progress is not None and (progress.history, progress.rev) == ((queued, held), 1)   # once
    # a decision that does not hold still loses
    assert not admissions.decide("7", frozenset({S.QUEUED}), Transition(S.HELD, T0 + 2, "again"))


def test_a_start_whose_answer_was_lost_is_recorded_once_and_reported_running(client):
    store = DynamoDBStore(client, NAMES, sleep=no_sleep)
    [job] = store.create([new_job()])
    [job] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0 + 1,
                                {"attempts": 1, "proc_token": "batch-1", "assigned": (0,)})])
    rev = raw(client, NAMES.jobs, it.job_key(job.id))[t.REVISION]
    lost = lose_first_answer(client, "UpdateItem", guarded_on(NAMES.jobs))

    result = ReconcileService(store, random.Random(0)).handle(
        BatchJobEvent("batch-1", job.id, 1, "RUNNING", None, None, None, T0 + 60, started_at=T0 + 60))

    assert lost
    assert (result.action, result.job.state) == (Action.RUNNING, S.RUNNING)   # not "ignored"
    item = raw(client, NAMES.jobs, it.job_key(job.id))
    assert item[t.REVISION] == rev + 1
    assert [tr.state for tr in history.decode(item["history"])].count(S.RUNNING) == 1
    assert result.job == store.get(job.id)
    # the next write, planned from the item as known, writes over it as usual and drops the token
    [ended] = store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "exit code 0", T0 + 100, {"ended_at": T0 + 100})])
    assert ended.state == S.SUCCEEDED and WRITE_TOKEN not in raw(client, NAMES.jobs, it.job_key(job.id))


@pytest.mark.parametrize("change", ["team", "policy"])
def test_a_quota_change_whose_answer_was_lost_is_written_once(client, change):
    store = DynamoDBStore(client, NAMES, sleep=no_sleep)
    quota = QuotaService(store)
    quota.set("ml", max_gpus=4)
    quota.set_policy(max_gpus_per_job=16)
    revision = (store.current_team("ml") if change == "team" else store.current_policy())[1]
    lost = lose_first_answer(client, "UpdateItem", guarded_on(NAMES.settings))

    if change == "team":
        assert quota.set("ml", max_gpus=8).max_gpus == 8
        stored, now = store.current_team("ml")
        assert stored is not None and stored.max_gpus == 8
    else:
        assert quota.set_policy(max_gpus_per_job=32).max_gpus_per_job == 32
        policy, now = store.current_policy()
        assert policy.max_gpus_per_job == 32

    assert lost
    assert now == revision + 1   # not written a second time on top of itself
    # a change read before another's still loses
    with pytest.raises(Conflict):
        if change == "team":
            store.set_team("ml", store.teams()["ml"], revision=revision)
        else:
            store.set_policy(store.policy(), revision=revision)


def test_an_alert_claim_whose_answer_was_lost_is_kept(client):
    records = DynamoDBBudgetRecords(client, NAMES, sleep=no_sleep)
    lost = lose_first_answer(client, "PutItem", guarded_on(NAMES.ledger))

    token = records.claim("ml:2024-05:80", T0, lease=300)

    assert lost
    assert token is not None and raw(client, NAMES.ledger, alert_key("ml:2024-05:80"))["token"] == token
    assert records.claim("ml:2024-05:80", T0 + 1, lease=300) is None   # another tick's claim still loses
    records.confirm("ml:2024-05:80", token, T0 + 2)
    assert records.sent(["ml:2024-05:80"], T0 + 1000) == {"ml:2024-05:80"}


def test_a_write_whose_condition_its_own_write_leaves_true_is_not_applied_twice(client):
    key = it.dump({t.PK: "counter", t.SK: "test"})
    client.put_item(TableName=NAMES.settings, Item={**key, "n": {"N": "0"}})
    lost = lose_first_answer(client, "UpdateItem", guarded_on(NAMES.settings))

    out = write_once(Retrying(client, sleep=no_sleep), "UpdateItem", TableName=NAMES.settings, Key=key,
                     UpdateExpression="ADD #n :one", ConditionExpression="attribute_exists(#n)",
                     ExpressionAttributeNames={"#n": "n"}, ExpressionAttributeValues={":one": {"N": "1"}})

    assert lost
    assert it.load(out["Attributes"])["n"] == 1 == raw(client, NAMES.settings, it.load(key))["n"]


@pytest.mark.parametrize("item, ours", [
    (None, False),                                      # no item (a missing one fails a condition too)
    ({}, False),
    ({"pk": {"S": "x"}}, False),                        # never written by a guarded write
    ({WRITE_TOKEN: {"S": "other"}}, False),             # another write's
    ({WRITE_TOKEN: {"S": "mine"}}, True),               # an earlier try of this very write
    ({WRITE_TOKEN: {"S": "mine"}, "rev": {"N": "9"}}, True),   # and written over since, token kept
    ({WRITE_TOKEN: {"N": "1"}}, False),
])
def test_a_failed_condition_is_our_own_write_only_where_the_item_holds_its_token(item, ours):
    assert written_by(item, "mine") is ours


@pytest.mark.parametrize("update, expected", [
    ("SET #n0 = :v0", "SET #gqa_wtok = :gqa_wtok, #n0 = :v0"),
    ("SET #n0 = :v0 REMOVE #n1 ADD #n2 :v1", "SET #gqa_wtok = :gqa_wtok, #n0 = :v0 REMOVE #n1 ADD #n2 :v1"),
    ("REMOVE #n1 SET #n0 = :v0", "REMOVE #n1 SET #gqa_wtok = :gqa_wtok, #n0 = :v0"),
    ("ADD #n0 :v0", "SET #gqa_wtok = :gqa_wtok ADD #n0 :v0"),
])
def test_an_update_writes_its_token_and_refuses_an_item_holding_it(update, expected):
    request = with_token("UpdateItem", {"UpdateExpression": update, "ConditionExpression": "#n0 = :v9 OR #n1 = :v9",
                                        "ExpressionAttributeNames": {"#n0": "a"}}, "tok")
    assert request["UpdateExpression"] == expected
    assert request["ConditionExpression"] == \
        "(#n0 = :v9 OR #n1 = :v9) AND (attribute_not_exists(#gqa_wtok) OR #gqa_wtok <> :gqa_wtok)"
    assert request["ExpressionAttributeNames"] == {"#n0": "a", "#gqa_wtok": WRITE_TOKEN}
    assert request["ExpressionAttributeValues"] == {":gqa_wtok": {"S": "tok"}}
    assert request["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_a_put_carries_its_token_and_only_guarded_puts_and_updates_take_one():
    put = with_token("PutItem", {"Item": {"pk": {"S": "a"}}, "ConditionExpression": "attribute_not_exists(pk)"}, "tok")
    assert put["Item"] == {"pk": {"S": "a"}, WRITE_TOKEN: {"S": "tok"}}
    with pytest.raises(ValueError):
        with_token("PutItem", {"Item": {}}, "tok")
    with pytest.raises(ValueError):
        with_token("DeleteItem", {"Key": {}, "ConditionExpression": "attribute_exists(pk)"}, "tok")
