"""Intake on SQS (moto): queues built from the synthesized template as their
definition says, messages on the tier's queue, FIFO ids only on FIFO queues,
bodies that parse back, and errors by code."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws import resources
from gqa.adapters.aws.resources import INTAKE, QUEUES, WAKEUP
from gqa.adapters.aws.sqs_intake import (KEY_ATTRIBUTE, SqsIntake, digest, dump_submission, parse_submission,
                                         submission_from_record)
from gqa.models.errors import BackendUnavailable, NotFound, Rejected, SpecError
from gqa.ports import Submission
from tests.aws.deployed import create_queues
from tests.aws.moto_support import capture, refuse, session
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
SUB = Submission(spec_json=json.dumps({"command": ["python", "train.py"], "team": "vision"}), owner="alice",
                 tier=1, idempotency_key="req-7f3a", environment={"HOME": "/home/alice", "LANG": "fr_FR.UTF-8"})


@pytest.fixture
def sqs():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        yield session().client("sqs")


def intake(sqs, fifo: bool = False, **kwargs) -> tuple[SqsIntake, resources.QueueUrls]:
    urls = create_queues(sqs, "gqa-t-", fifo=fifo)
    sleeps: list[float] = []
    made = SqsIntake(sqs, urls.intake, urls.wakeup, sleep=sleeps.append, **kwargs)
    made.sleeps = sleeps  # type: ignore[attr-defined]
    return made, urls


def receive(sqs, url: str) -> list[dict]:
    # WaitTimeSeconds=0: the queues long-poll (20 s) by definition, and moto waits as SQS would
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                               MessageSystemAttributeNames=["All"], WaitTimeSeconds=0).get("Messages", [])


def attributes(sqs, url: str) -> dict[str, str]:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


# -- the queues, from their definition --------------------------------------------------------------

@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_every_queue_has_its_dead_letter_queue_and_visibility_from_the_definition(sqs, fifo):
    urls = create_queues(sqs, "gqa-t-", fifo=fifo)

    for queue in QUEUES:
        url = sqs.get_queue_url(QueueName=queue.name("gqa-t-", fifo))["QueueUrl"]
        attrs = attributes(sqs, url)
        redrive = json.loads(attrs["RedrivePolicy"])
        dlq_arn = attributes(sqs, urls.dead_letters[queue.logical])["QueueArn"]
        assert redrive == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queue.max_receive_count}
        assert dlq_arn.endswith(queue.dead_letter_name("gqa-t-", fifo))
        assert int(attrs["VisibilityTimeout"]) == 6 * queue.consumer_timeout
        assert (attrs.get("FifoQueue") == "true") is queue.is_fifo(fifo)
    assert set(urls.intake) == {0, 1, 2}
    assert urls.wakeup.endswith("gqa-t-wakeup")            # a hint queue is never FIFO
    assert all(u.endswith(".fifo") is fifo for u in urls.intake.values())


def test_a_message_that_keeps_failing_moves_to_the_dead_letter_queue(sqs):
    made, urls = intake(sqs)
    made.send(SUB)
    queue = INTAKE[1]
    for _ in range(queue.max_receive_count):   # each delivery "fails": received, never deleted
        assert sqs.receive_message(QueueUrl=urls.intake[1], VisibilityTimeout=0, WaitTimeSeconds=0).get("Messages")

    assert receive(sqs, urls.intake[1]) == []
    [dead] = receive(sqs, urls.dead_letters[queue.logical])
    assert parse_submission(dead["Body"]) == SUB


# -- send and wake ------------------------------------------------------------------------------

def test_send_puts_the_submission_on_its_tiers_standard_queue(sqs):
    made, urls = intake(sqs)
    sent = capture(sqs, "SendMessage")

    made.send(SUB)

    [message] = receive(sqs, urls.intake[1])
    assert parse_submission(message["Body"]) == SUB
    assert message["MessageAttributes"][KEY_ATTRIBUTE]["StringValue"] == "req-7f3a"
    assert message["MessageAttributes"]["tier"] == {"DataType": "Number", "StringValue": "1"}
    assert "MessageGroupId" not in sent[0] and "MessageDeduplicationId" not in sent[0]
    assert receive(sqs, urls.intake[0]) == [] and receive(sqs, urls.intake[2]) == []


def test_on_fifo_queues_the_key_deduplicates_and_the_owner_groups(sqs):
    made, urls = intake(sqs, fifo=True)

    made.send(SUB)
    made.send(SUB)                                        # a client resending the same request
    made.send(Submission(SUB.spec_json, "bob", 1, "req-other"))

    messages = receive(sqs, urls.intake[1])
    assert [m["Attributes"]["MessageGroupId"] for m in messages] == ["alice", "bob"]
    assert messages[0]["Attributes"]["MessageDeduplicationId"] == digest("req-7f3a")


def test_a_continuation_travels_with_its_start_and_is_deduplicated_as_its_own_message(sqs):
    made, urls = intake(sqs, fifo=True)
    array = replace(SUB, job_ids=tuple(f"9_{i}" for i in range(5000)), seq=1)

    made.send(array)
    made.send(replace(array, start=2500))                 # the rest, handed on by the first chunk
    made.send(replace(array, start=2500))                 # sent again after a crash: dropped as a duplicate

    messages = receive(sqs, urls.intake[1])
    assert [parse_submission(m["Body"]).start for m in messages] == [0, 2500]
    assert len({m["Attributes"]["MessageDeduplicationId"] for m in messages}) == 2
    assert len(messages[1]["Body"]) - len(messages[0]["Body"]) == len(',"start":2500')


@pytest.mark.parametrize("start", [-1, 5, True, "1"])
def test_a_start_outside_the_submission_is_malformed(start):
    body = json.loads(dump_submission(replace(SUB, job_ids=("9_0", "9_1", "9_2", "9_3", "9_4"), seq=1)))
    with pytest.raises(SpecError, match="start"):
        parse_submission(json.dumps({**body, "start": start}))


def test_wake_dispatcher_sends_to_the_wakeup_queue(sqs):
    made, urls = intake(sqs)

    made.wake_dispatcher()
    made.wake_dispatcher()

    assert [json.loads(m["Body"]) for m in receive(sqs, urls.wakeup)] == [{"wake": True}] * 2
    assert all(receive(sqs, url) == [] for url in urls.intake.values())


def test_an_unknown_tier_is_not_found(sqs):
    made, _ = intake(sqs)
    with pytest.raises(NotFound):
        made.send(Submission(SUB.spec_json, "alice", 7, "k"))


def test_an_oversized_submission_is_rejected_before_sending(sqs):
    made, _ = intake(sqs)
    sent = capture(sqs, "SendMessage")
    with pytest.raises(Rejected, match="KiB"):
        made.send(Submission(SUB.spec_json, "alice", 1, "k", environment={"BIG": "x" * resources.MAX_MESSAGE_BYTES}))
    assert sent == []


@pytest.mark.parametrize("over", [0, 1])
def test_the_size_checked_is_the_body_and_its_attributes_as_sqs_counts_it(sqs, over):
    """A body of 256 KiB less a few bytes passes a check of the body alone and is refused by SQS
    (InvalidParameterValue, every retry alike): the attributes count too (the limits layer as SQS)."""
    made, urls = intake(sqs)
    attributes = len(KEY_ATTRIBUTE) + len("String") + len("k") + len("tier") + len("Number") + len("1")

    def sized(pad: int) -> Submission:
        return Submission(SUB.spec_json, "alice", 1, "k", environment={"PAD": "x" * pad})
    pad = resources.MAX_MESSAGE_BYTES - attributes - len(dump_submission(sized(0)).encode()) + over
    assert len(dump_submission(sized(pad)).encode()) < resources.MAX_MESSAGE_BYTES     # the body alone fits
    if over:
        with pytest.raises(Rejected, match=r"the submission is 256\.0 KiB; the queue takes at most 256 KiB"):
            made.send(sized(pad))
    else:
        made.send(sized(pad))
        [message] = sqs.receive_message(QueueUrl=urls.intake[1])["Messages"]
        assert parse_submission(message["Body"]).environment["PAD"] == "x" * pad


def test_a_missing_queue_is_not_found(sqs):
    made, urls = intake(sqs)
    sqs.delete_queue(QueueUrl=urls.intake[1])
    with pytest.raises(NotFound):
        made.send(SUB)


def test_throttling_is_retried_then_reported_as_unavailable(sqs):
    made, urls = intake(sqs, attempts=3)
    refused = refuse(sqs, "SendMessage", "RequestThrottled", times=2)

    made.send(SUB)

    assert refused == ["SendMessage"] * 2 and len(made.sleeps) == 2
    assert len(receive(sqs, urls.intake[1])) == 1
    refuse(sqs, "SendMessage", "ThrottlingException", times=10)
    with pytest.raises(BackendUnavailable):
        made.wake_dispatcher()


# -- the body ------------------------------------------------------------------------------------

def test_bodies_are_ascii_json_and_read_back_exactly():
    sub = Submission('{"name": "entraînement"}', "zoë", 0, "clé", {"MSG": "héllo\n\u2603"}, ("12_0", "12_1"), 40)
    body = dump_submission(sub)
    assert body.isascii()
    assert parse_submission(body) == sub
    assert submission_from_record({"messageId": "1", "body": body, "messageAttributes": {}}) == sub
    assert parse_submission(dump_submission(Submission("{}", "a", 2, "k"))).environment is None
    assert parse_submission(dump_submission(Submission("{}", "a", 2, "k"))).job_ids == ()


@pytest.mark.parametrize("job_ids", [
    (), ("12",), ("12_0",), ("12_0", "12_1", "12_2"), ("12_0", "12_2", "12_4", "12_5", "12_9"), ("3_7", "3_1"),
    ("4", "5"), tuple(f"7_{i}" for i in range(0, 100_000, 3)),
])
def test_job_ids_read_back_exactly(job_ids):
    sub = replace(SUB, job_ids=job_ids, seq=8)
    assert parse_submission(dump_submission(sub)) == sub


def test_the_largest_array_fits_a_message(sqs):
    made, urls = intake(sqs)
    sub = replace(SUB, job_ids=tuple(f"123456_{i}" for i in range(100_000)), seq=10**9)

    made.send(sub)

    [message] = receive(sqs, urls.intake[1])
    assert len(message["Body"]) < 1024
    assert parse_submission(message["Body"]) == sub


@pytest.mark.parametrize("body", [
    "not json", "[1, 2]", "{}", '{"v": 2}',
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1}),                       # no key
    json.dumps({"v": 1, "spec_json": "{}", "owner": "", "tier": 1, "idempotency_key": "k"}),
    json.dumps({"v": 1, "spec_json": {}, "owner": "a", "tier": 1, "idempotency_key": "k"}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 5, "idempotency_key": "k"}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": True, "idempotency_key": "k"}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": "1", "idempotency_key": "k"}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k", "environment": {"A": 1}}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k", "job_ids": "12"}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k", "job_ids": [12]}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k", "job_ids": ["x"]}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k",
                "job_ids": {"group": "x", "runs": [[0, 1, 1]]}}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k",
                "job_ids": {"group": "1", "runs": [[2, 1, 1]]}}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k",
                "job_ids": {"group": "1", "runs": [[0, 1, 0]]}}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k",
                "job_ids": {"group": "1", "runs": [[0, 10**9, 1]]}}),                          # too many
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k",
                "job_ids": {"group": "1"}}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k", "seq": 0}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k", "seq": "3"}),
    json.dumps({"v": 1, "spec_json": "{}", "owner": "a", "tier": 1, "idempotency_key": "k", "seq": True}),
])
def test_malformed_bodies_are_spec_errors(body):
    with pytest.raises(SpecError, match="malformed submission"):
        parse_submission(body)


def test_a_record_without_a_body_is_a_spec_error():
    with pytest.raises(SpecError):
        submission_from_record({"messageId": "1"})


def test_the_wakeup_queue_is_defined_standard():
    assert not WAKEUP.is_fifo(True)
