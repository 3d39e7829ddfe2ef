"""The admit Lambda handler, called directly (moto never runs handler code)
with real-shaped SQS events, on moto DynamoDB tables and SQS queues built
from the synthesized data stack (tests/aws/deployed.py)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.sqs_intake import dump_submission
from gqa.adapters.aws.tables import TableNames
from gqa.adapters.clock import SystemClock
from gqa.models.job import JobState
from gqa.ports import Change, Inventory, Submission
from gqa.scheduling import Gpu, Policy
from gqa.services.submit import SubmitService
from tests.aws.deployed import create_queues, create_tables
from tests.aws.moto_support import LambdaContext, emf, metric, refuse, session
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS
from tests.services.fakes import RecordingIntake

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-admit-")
INVENTORY = Inventory(gpus=(Gpu(0, "a10g", 0.5, spot=True), Gpu(1, "a10g", 1.5)))
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:gqa-intake-normal"


CONTEXT = LambdaContext(function_name="gqa-admit")


@pytest.fixture
def aws():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        urls = create_queues(session().client("sqs"), prefix="gqa-admit-")
        env = {"GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings,
               "GQA_LEDGER_TABLE": NAMES.ledger, "GQA_WAKEUP_QUEUE_URL": urls.wakeup}
        with mock.patch.dict(os.environ, env):
            from lambdas import admit
            admit.container.cache_clear()    # a fresh "container" per test: its clients are moto's
            yield admit, urls
            admit.container.cache_clear()


@pytest.fixture
def store(aws) -> DynamoDBStore:
    store = DynamoDBStore(session().client("dynamodb"), NAMES)
    store.set_inventory(INVENTORY)
    return store


def accepted(store: DynamoDBStore, job_spec, *, owner: str = "bob") -> Submission:
    """What the API sends for a spec: ids reserved in the store, the submission on its way."""
    intake = RecordingIntake()
    SubmitService(store, SystemClock()).accept(job_spec, owner=owner, environment={"HOME": "/home/bob"},
                                               intake=intake)
    return intake.sent[0]


def record(submission: Submission, *, message_id: str = "m-1") -> dict:
    return {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": dump_submission(submission),
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000",
                           "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": "1700000000000"},
            "messageAttributes": {}, "md5OfBody": "0", "eventSource": "aws:sqs",
            "eventSourceARN": QUEUE_ARN, "awsRegion": "us-east-1"}


def call(module, *records: dict) -> dict:
    return module.handler({"Records": list(records)}, CONTEXT)


def wakeups(urls) -> int:
    sqs = session().client("sqs")
    return len(sqs.receive_message(QueueUrl=urls.wakeup, MaxNumberOfMessages=10, WaitTimeSeconds=0)
               .get("Messages", []))


def test_a_valid_submission_becomes_a_queued_job_of_the_verified_owner(aws, store):
    module, urls = aws
    submission = accepted(store, spec(owner="mallory"))
    answer = call(module, record(submission))
    assert answer == {"batchItemFailures": []}
    [job] = store.list()
    assert (job.id, job.state) == (submission.job_ids[0], JobState.QUEUED)
    assert job.owner == "bob"                       # the Submission's owner, not the spec's
    assert job.submit_env == {"HOME": "/home/bob"}
    assert wakeups(urls) == 1


def test_a_redelivered_message_creates_no_second_job(aws, store):
    module, _ = aws
    submission = accepted(store, spec())
    call(module, record(submission, message_id="m-1"))
    [job] = store.list()
    store.apply([Change(job.id, JobState.QUEUED, JobState.CANCELLED, "cancelled by bob", job.submitted_at + 1)])
    assert call(module, record(submission, message_id="m-2")) == {"batchItemFailures": []}
    assert [(j.id, j.state) for j in store.list()] == [(job.id, JobState.CANCELLED)]   # left as it was
    call(module, record(accepted(store, spec()), message_id="m-3"))    # another submission, other ids
    assert len(store.list()) == 2


def test_an_array_is_admitted_once_with_all_its_tasks(aws, store):
    module, _ = aws
    submission = accepted(store, spec(array="0-2"))
    call(module, record(submission))
    call(module, record(submission))
    assert [j.id for j in store.list()] == list(submission.job_ids)


def test_a_redelivery_in_the_same_batch_is_harmless(aws, store):
    module, urls = aws
    submission = accepted(store, spec(array="0-1"))
    assert call(module, record(submission, message_id="m-1"), record(submission, message_id="m-2")) == \
        {"batchItemFailures": []}
    assert len(store.list()) == 2
    assert wakeups(urls) == 1                      # one wake-up per batch


def test_a_submission_over_a_limit_set_since_it_was_accepted_is_recorded_rejected(aws, store):
    module, urls = aws
    submission = accepted(store, spec(resources={"gpus": 2}))
    store.set_policy(Policy(max_gpus_per_job=1))
    assert call(module, record(submission)) == {"batchItemFailures": []}
    [job] = store.list()
    assert (job.id, job.state) == (submission.job_ids[0], JobState.REJECTED)
    assert "asks for 2 GPUs; the limit per job is 1" in job.reason
    assert wakeups(urls) == 0


@pytest.mark.parametrize("change", [
    {"spec_json": '{"name": "x"}'},                 # not a valid spec
    {"job_ids": ()},                                # sent without reserved ids
    {"job_ids": ("1_0",)},                          # ids that do not fit the spec
])
def test_a_submission_that_cannot_be_admitted_is_consumed(aws, store, change):
    module, urls = aws
    submission = replace(accepted(store, spec()), **change)
    assert call(module, record(submission)) == {"batchItemFailures": []}
    assert store.list() == []
    assert wakeups(urls) == 0


def test_a_malformed_message_is_consumed(aws, store):
    module, _ = aws
    bad = {**record(accepted(store, spec())), "body": "not json"}
    assert call(module, bad) == {"batchItemFailures": []}
    assert store.list() == []


def test_throttling_fails_only_that_record_and_the_retry_admits_it(aws, store):
    module, _ = aws
    dynamodb = module.container().store.client
    throttled, good = accepted(store, spec()), accepted(store, spec())
    refused = refuse(dynamodb, "TransactWriteItems", "ThrottlingException", times=5)   # the store's tries
    answer = call(module, record(throttled, message_id="m-busy"), record(good, message_id="m-ok"))
    assert len(refused) == 5
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-busy"}]}
    assert [j.id for j in store.list()] == list(good.job_ids)
    # nothing was half-written: the redelivery admits it under its ids
    assert call(module, record(throttled, message_id="m-busy")) == {"batchItemFailures": []}
    assert [j.id for j in store.list()] == list(throttled.job_ids + good.job_ids)


def test_without_an_inventory_the_record_fails_to_be_retried(aws):
    module, _ = aws
    store = DynamoDBStore(session().client("dynamodb"), NAMES)
    store.set_inventory(INVENTORY)
    submission = accepted(store, spec())
    session().client("dynamodb").delete_item(TableName=NAMES.settings, Key={"pk": {"S": "setting"},
                                                                            "sk": {"S": "inventory"}})
    assert call(module, record(submission)) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


def test_admissions_are_counted_by_tier_as_metrics(aws, store, capsys):
    module, _ = aws
    high = accepted(store, spec(priority="high", array="0-2"))
    low = accepted(store, spec(priority="low", resources={"gpus": 2}))
    store.set_policy(Policy(max_gpus_per_job=1))                  # the low one is over the limit by now
    capsys.readouterr()
    call(module, record(high, message_id="m-1"), record(low, message_id="m-2"))
    docs = emf(capsys.readouterr().out)
    assert {d["service"] for d in docs} == {"gqa-admit"}
    assert metric(docs, "JobsAdmitted", tier="high") == [3] and metric(docs, "JobsRejected", tier="high") == [0]
    assert metric(docs, "JobsAdmitted", tier="low") == [0] and metric(docs, "JobsRejected", tier="low") == [1]
    assert metric(docs, "JobsAwaitingApproval", tier="low") == [0]


# -- approval requests on the alerts topic ----------------------------------------------------------
@pytest.fixture
def approvers(aws):
    """The alerts topic, with a queue standing in for the approvers' inbox (every message, as SNS
    delivers it: subject and attributes in the envelope), and the admit function told of the topic."""
    module, _ = aws
    sns, sqs = session().client("sns"), session().client("sqs")
    topic = sns.create_topic(Name="gqa-admit-alerts")["TopicArn"]
    inbox = sqs.create_queue(QueueName="gqa-admit-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    with mock.patch.dict(os.environ, {"GQA_ALERTS_TOPIC_ARN": topic}):
        module.container.cache_clear()
        yield module, inbox
        module.container.cache_clear()


def announced(inbox: str) -> list[dict]:
    """The SNS envelopes delivered to the inbox so far."""
    sqs = session().client("sqs")
    out = []
    while True:
        got = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if not got:
            return out
        for message in got:
            out.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])


APPROVAL_POLICY = Policy(approval_gpus=1)


def test_a_submission_waiting_for_approval_is_announced_with_its_numbers_and_commands(approvers, store):
    module, inbox = approvers
    store.set_policy(APPROVAL_POLICY)
    submission = accepted(store, spec(team="vision", resources={"gpus": 2, "gpu_type": "a10g"},
                                      limits={"wall_time": "10h"}))
    assert call(module, record(submission)) == {"batchItemFailures": []}
    [job] = store.list()
    assert job.state == JobState.PENDING_APPROVAL
    [envelope] = announced(inbox)
    assert envelope["Subject"] == f"gqa: job {job.id} (train) from bob waits for approval"
    assert {k: v["Value"] for k, v in envelope["MessageAttributes"].items()} == {"kind": "approval", "team": "vision"}
    body = envelope["Message"]
    assert "2 x a10g GPUs (on demand) for up to 10h00m: up to 20.0 GPU-hours, up to $30.00" in body
    assert "asks for 2 GPUs (approval needed over 1)" in body
    assert f"gqa approve {job.id}\n" in body and f'gqa deny {job.id} --reason "..."' in body


def test_an_array_is_announced_once_however_often_it_is_delivered(approvers, store):
    module, inbox = approvers
    store.set_policy(APPROVAL_POLICY)
    submission = accepted(store, spec(resources={"gpus": 2}, array="0-2"))
    call(module, record(submission, message_id="m-1"), record(submission, message_id="m-2"))   # same batch
    call(module, record(submission, message_id="m-3"))                                        # a later one
    assert [j.state for j in store.list()] == [JobState.PENDING_APPROVAL] * 3
    [envelope] = announced(inbox)
    assert envelope["Subject"] == f"gqa: array {submission.job_ids[0].split('_')[0]} (train, 3 jobs) from bob " \
                                  "waits for approval"


def test_a_queued_submission_is_not_announced(approvers, store):
    module, inbox = approvers
    store.set_policy(APPROVAL_POLICY)
    call(module, record(accepted(store, spec(resources={"gpus": 1}))))
    assert [j.state for j in store.list()] == [JobState.QUEUED]
    assert announced(inbox) == []


def test_an_announcement_sns_refuses_leaves_the_jobs_admitted(approvers, store):
    module, inbox = approvers
    store.set_policy(APPROVAL_POLICY)
    refused = refuse(module.container().service.notifier.client, "Publish", "AuthorizationError", times=1)
    assert call(module, record(accepted(store, spec(resources={"gpus": 2})))) == {"batchItemFailures": []}
    assert refused == ["Publish"]
    assert [j.state for j in store.list()] == [JobState.PENDING_APPROVAL]
    assert announced(inbox) == []


def test_without_the_topic_a_submission_waiting_for_approval_is_admitted_unannounced(aws, store):
    module, _ = aws
    store.set_policy(APPROVAL_POLICY)
    assert module.container().service.notifier is None
    assert call(module, record(accepted(store, spec(resources={"gpus": 2})))) == {"batchItemFailures": []}
    assert [j.state for j in store.list()] == [JobState.PENDING_APPROVAL]
