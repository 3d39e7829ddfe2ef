"""The admit Lambda handler, called directly (moto never runs handler code)
with real-shaped SQS events, on moto DynamoDB tables and SQS queues built
from gqa.adapters.aws.tables and resources."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import create_queues
from gqa.adapters.aws.sqs_intake import dump_submission
from gqa.adapters.aws.tables import TableNames, create_tables
from gqa.models.job import JobState
from gqa.ports import Inventory, Submission
from gqa.scheduling import Gpu
from tests.aws.moto_support import LambdaContext, refuse, session
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS

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
            admit.admission.cache_clear()    # a fresh "container" per test: its clients are moto's
            yield admit, urls
            admit.admission.cache_clear()


@pytest.fixture
def store(aws) -> DynamoDBStore:
    store = DynamoDBStore(session().client("dynamodb"), NAMES)
    store.set_inventory(INVENTORY)
    return store


def record(spec_json: str, *, key: str = "key-1", owner: str = "bob", message_id: str = "m-1") -> dict:
    body = dump_submission(Submission(spec_json=spec_json, owner=owner, tier=1, idempotency_key=key,
                                      environment={"HOME": "/home/bob"}))
    return {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body,
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
    answer = call(module, record(spec(owner="mallory").model_dump_json()))
    assert answer == {"batchItemFailures": []}
    [job] = store.list()
    assert job.state == JobState.QUEUED
    assert job.owner == "bob"                       # the Submission's owner, not the spec's
    assert job.submit_env == {"HOME": "/home/bob"}
    assert wakeups(urls) == 1


def test_a_redelivered_message_creates_no_second_job(aws, store):
    module, _ = aws
    body = spec().model_dump_json()
    call(module, record(body, message_id="m-1"))
    assert call(module, record(body, message_id="m-2")) == {"batchItemFailures": []}
    assert len(store.list()) == 1
    call(module, record(body, key="key-2", message_id="m-3"))    # another key is another submission
    assert len(store.list()) == 2


def test_an_array_is_admitted_once_with_all_its_tasks(aws, store):
    module, _ = aws
    body = spec(array="0-2").model_dump_json()
    call(module, record(body))
    call(module, record(body))
    assert len(store.list()) == 3


@pytest.mark.parametrize("body", [
    '{"name": "x"}',                                                  # not a valid spec
    spec(resources={"gpus": 64}).model_dump_json(),                   # over the queue's GPUs: Rejected
])
def test_a_submission_that_cannot_be_admitted_is_consumed(aws, store, body):
    module, urls = aws
    assert call(module, record(body)) == {"batchItemFailures": []}
    assert store.list() == []
    assert wakeups(urls) == 0


def test_a_malformed_message_is_consumed(aws, store):
    module, _ = aws
    bad = {**record(spec().model_dump_json()), "body": "not json"}
    assert call(module, bad) == {"batchItemFailures": []}
    assert store.list() == []


def test_throttling_fails_only_that_record_and_the_retry_admits_it(aws, store):
    module, _ = aws
    dynamodb = module.admission().store.client
    refused = refuse(dynamodb, "TransactWriteItems", "ThrottlingException", times=5)   # the store's tries
    good, throttled = record(spec().model_dump_json(), key="k-ok", message_id="m-ok"), \
        record(spec().model_dump_json(), key="k-busy", message_id="m-busy")
    answer = call(module, throttled, good)
    assert len(refused) == 5
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-busy"}]}
    assert len(store.list()) == 1
    # the failed admission left no claim behind: the redelivery admits it
    assert call(module, throttled) == {"batchItemFailures": []}
    assert len(store.list()) == 2


def test_without_an_inventory_the_record_fails_to_be_retried(aws):
    module, _ = aws
    assert call(module, record(spec().model_dump_json())) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
