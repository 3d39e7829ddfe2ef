"""Large arrays admitted in chunks, through the real handlers on moto: the API
answers a range, the admit function writes one chunk per intake message and
hands the rest on, each chunk paced within what one partition takes, every
task written once whatever is redelivered, duplicated or killed between two
steps, and a cancel or an approval meanwhile reaching the tasks not yet
written (services/chunked.py, gqa/adapters/aws/admissions.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

from gqa.adapters.aws import admissions
from gqa.adapters.aws.admissions import (ADMIT_UNITS_PER_SECOND, CHUNK_SECONDS, SLICE, DynamoDBAdmissions,
                                         chunk_tasks, units_per_task)
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.models.job import JobState
from gqa.ports import Submission
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.aws_limits import LIMITS, PARTITION_WRITE_UNITS_PER_SECOND, SQS_MESSAGE_BYTES
from tests.aws.fake_batch import API_CONTEXT, CONTEXT, NAMES, REGION, Deployment, deployment
from tests.aws.lambda_driver import ContainerDied
from tests.aws.transaction_conflicts import rollback_by_item
from tests.builders import spec

pytestmark = pytest.mark.aws
S = JobState


class Pacing:
    """The admit function's pacing on a virtual clock: its waits pass at once, and are counted."""

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def world() -> Iterator[tuple[Deployment, Pacing]]:
    pacing = Pacing()
    with deployment(1_000_000.0) as world, rollback_by_item(), \
            mock.patch.object(admissions, "monotonic", pacing.monotonic), \
            mock.patch.object(admissions, "sleep", pacing.sleep):
        world.dispatch.container()   # its cold start registers the pools: admission checks against them
        yield world, pacing


@pytest.fixture
def small_chunks() -> Iterator[None]:
    """Chunks of one slice (100 tasks), so a 500-task array takes five messages."""
    with mock.patch.object(admissions, "CHUNK_SECONDS", 0.1):
        yield


def store(world: Deployment) -> DynamoDBStore:
    return DynamoDBStore(world.client("dynamodb"), NAMES)


def progress(world: Deployment, group: str):
    return DynamoDBAdmissions(world.client("dynamodb"), NAMES).progress(group)


class Poller:
    """Lambda's poller on the normal tier's intake queue, one message per
    invocation, deleting a message only once the invocation consumed it: a
    container that dies leaves it to be delivered again (the same message id)."""

    def __init__(self, world: Deployment):
        self.world = world
        self.sqs = world.client("sqs")
        self.url = world.urls.intake[1]
        self.arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        self.handled: list[Submission] = []

    def next(self) -> dict[str, Any] | None:
        out = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=1, VisibilityTimeout=0, WaitTimeSeconds=0,
                                       AttributeNames=["All"], MessageAttributeNames=["All"])
        if not out.get("Messages"):
            return None
        m = out["Messages"][0]
        return {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m.get("Attributes", {}), "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": self.arn,
                "awsRegion": REGION}

    def deliver(self, record: dict[str, Any], *, delete: bool = True) -> bool:
        """One invocation with the record; whether it was consumed (and deleted, with `delete`)."""
        try:
            answer = self.world.admit.handler({"Records": [record]}, CONTEXT)
        except ContainerDied:
            return False
        consumed = answer == {"batchItemFailures": []}
        if consumed and delete:
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=record["receiptHandle"])
        if consumed:
            self.handled.append(json.loads(record["body"]))
        return consumed

    def drain(self, most: int = 500) -> int:
        """Deliver until the queue is empty; how many deliveries it took."""
        for n in range(most):
            record = self.next()
            if record is None:
                return n
            self.deliver(record)
        raise AssertionError(f"still messages after {most} deliveries: a chain that never ends?")

    def messages(self) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def admitted_once(world: Deployment, group: str, count: int) -> list:
    jobs = store(world).resolve(group, history=False)
    assert sorted(j.array_index for j in jobs) == list(range(count))   # each task, once
    assert len({j.seq for j in jobs}) == count
    return jobs


# -- 100,000 tasks: the pure parts ---------------------------------------------------------------

def test_a_100000_task_array_is_answered_in_bytes_and_travels_in_one_small_message(world):
    world, _ = world
    event = rest_event("POST", "/jobs", arn=user_arn("alice"),
                       body={"spec": spec(array="0-99999").model_dump(mode="json"), "environment": {}})
    answer = world.api.handler(event, API_CONTEXT)
    data = json.loads(answer["body"])
    assert answer["statusCode"] == 202 and len(answer["body"]) < 3000
    assert (data["count"], data["first_id"], data["last_id"]) == (100_000, f"{data['group']}_0",
                                                                   f"{data['group']}_99999")
    record = Poller(world).next()
    assert len(record["body"]) < 8 * 1024 < SQS_MESSAGE_BYTES
    # a continuation is the same message with where it starts: no larger, whatever the start
    submission = json.loads(record["body"])
    assert len(record["body"]) + len(',"start":99999') <= SQS_MESSAGE_BYTES and "start" not in submission


def test_a_100000_task_array_is_planned_in_chunks_each_within_a_partitions_share():
    job = spec(array="0-99999")
    from gqa.services.submit import SubmitService
    [record] = SubmitService._records(job, {"HOME": "/home/alice"}, 1.0, S.QUEUED, "admitted", ())[:1]
    record = replace(record, id="12345_99999", group="12345", seq=10 ** 9)
    per_task, chunk = units_per_task(record), chunk_tasks(record)
    assert chunk % SLICE == 0 and chunk * per_task <= ADMIT_UNITS_PER_SECOND * CHUNK_SECONDS
    assert ADMIT_UNITS_PER_SECOND * CHUNK_SECONDS <= PARTITION_WRITE_UNITS_PER_SECOND * CHUNK_SECONDS / 2
    chunks = -(-100_000 // chunk)
    assert 10 <= chunks <= 200, (per_task, chunk)     # minutes of writes, each message within its time
    assert chunk_tasks(record, seconds=2.0) < chunk   # a short invocation writes a smaller chunk


# -- 10,000 tasks end to end -----------------------------------------------------------------------

@pytest.mark.slow
def test_a_10000_task_array_is_admitted_once_in_paced_chunks_and_a_job_behind_it_waits_one_chunk(world):
    world, pacing = world
    array = world.send(spec(array="0-9999", name="sweep"))
    single = world.send(spec(name="eval"))
    poller = Poller(world)
    per_chunk: list[tuple[int, str, float]] = []
    single_after = None
    while (record := poller.next()) is not None:
        LIMITS.reset()
        began = pacing.t
        assert poller.deliver(record)
        units, partition, key = LIMITS.hottest_with_indexes(NAMES.jobs)
        if json.loads(record["body"])["job_ids"] != [single.first_id]:
            per_chunk.append((units, f"{partition} {key}", pacing.t - began))
        elif single_after is None:
            single_after = len(per_chunk)
    assert single_after is not None and single_after <= 1     # admitted after at most one chunk of the array
    jobs = admitted_once(world, array.group, 10_000)
    assert {j.state for j in jobs} == {S.QUEUED}
    assert progress(world, array.group).remaining == 0
    first = store(world).get(array.first_id)
    per_slice = SLICE * units_per_task(first) / ADMIT_UNITS_PER_SECOND
    assert len(per_chunk) == -(-10_000 // chunk_tasks(first)) >= 4
    for units, partition, paced in per_chunk:
        # within what one partition takes in the chunk's time, and never faster than the pace
        assert units <= PARTITION_WRITE_UNITS_PER_SECOND * CHUNK_SECONDS, partition
        assert units <= PARTITION_WRITE_UNITS_PER_SECOND * (paced + per_slice), partition
    print(f"\n10,000 tasks: {len(per_chunk)} chunks of {chunk_tasks(first)}, {units_per_task(first)} units a "
          f"task; hottest partition {max(per_chunk)[0]} units a chunk ({max(per_chunk)[1]}), paced over "
          f"{max(p for *_, p in per_chunk):.1f} s of {CHUNK_SECONDS:.0f}")


# -- redelivery, duplicates, crashes ---------------------------------------------------------------

def test_a_redelivered_chunk_writes_nothing_new_and_the_chain_stays_single(world, small_chunks):
    world, _ = world
    array = world.send(spec(array="0-499"))
    poller = Poller(world)
    record = poller.next()
    assert poller.deliver(record, delete=False)
    LIMITS.reset()
    assert poller.deliver(record)                          # the same message again: consumed
    assert LIMITS.hottest(NAMES.jobs) == 0                 # no task written again
    # it cannot tell a lost send from a lost delete, so it sends its continuation again: the copy
    # finds its chunk moved on by the first and stops there
    assert poller.drain() == 4 + 1
    admitted_once(world, array.group, 500)
    starts = [m.get("start", 0) for m in poller.handled]
    assert starts.count(0) == 2 and starts.count(100) == 2 and all(starts.count(s) == 1 for s in (200, 300, 400))


def test_a_duplicated_continuation_does_not_fork_the_chain(world, small_chunks):
    world, _ = world
    array = world.send(spec(array="0-499"))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    continuation = poller.next()
    poller.sqs.send_message(QueueUrl=poller.url, MessageBody=continuation["body"])   # sent twice
    deliveries = poller.drain()
    assert deliveries == 4 + 1                 # the copy is consumed once, having found its chunk moved on
    admitted_once(world, array.group, 500)
    starts = [m.get("start", 0) for m in poller.handled]
    assert starts.count(100) == 2 and all(starts.count(s) == 1 for s in (0, 200, 300, 400))


@pytest.mark.parametrize("dies", ["after the write", "after the progress moved", "after the send"])
def test_a_container_dying_between_two_steps_leaves_the_array_admitted_once(world, small_chunks, dies):
    world, _ = world
    array = world.send(spec(array="0-499"))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    record = poller.next()                       # the chunk at 100
    died = []

    def die_once(*_: Any, **__: Any) -> None:
        if not died:
            died.append(True)
            raise ContainerDied()

    if dies == "after the write":
        target = mock.patch.object(DynamoDBAdmissions, "advance", side_effect=lambda *a, **k: die_once(),
                                   autospec=True)
    elif dies == "after the progress moved":
        target = mock.patch.object(SqsIntake, "send", side_effect=lambda *a, **k: die_once(), autospec=True)
    else:
        target = None
    if target is not None:
        with target:
            assert not poller.deliver(record)
        assert died
    else:
        assert poller.deliver(record, delete=False)       # its work done, the delete lost
    assert poller.drain() <= 6
    admitted_once(world, array.group, 500)
    assert progress(world, array.group).remaining == 0


# -- decisions on the group while it is admitted ---------------------------------------------------

@pytest.mark.slow
def test_cancelling_an_array_being_admitted_writes_the_rest_cancelled_and_status_says_so(world, small_chunks):
    world, _ = world
    array = world.send(spec(array="0-499"))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    status = get(world, f"/jobs/{array.group}")
    assert status["admitting"] == 400 and len(status["jobs"]) == 100
    cancel = world.api.handler(rest_event("POST", f"/jobs/{array.group}/cancel", arn=user_arn("alice")),
                               API_CONTEXT)
    assert cancel["statusCode"] == 200, cancel
    poller.drain()
    jobs = admitted_once(world, array.group, 500)
    assert {j.state for j in jobs} == {S.CANCELLED}
    assert {j.reason for j in jobs} == {"cancelled by user"}
    assert get(world, f"/jobs/{array.group}")["admitting"] == 0


@pytest.mark.slow
def test_a_cancel_while_a_chunk_is_written_reaches_that_chunk_too(world, small_chunks):
    world, _ = world
    array = world.send(spec(array="0-299"))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    advance = DynamoDBAdmissions.advance
    cancelled = []

    def cancel_first(self, *args: Any, **kwargs: Any) -> bool:
        if not cancelled:   # the user's cancel lands between the chunk's writes and its progress
            cancelled.append(in_steps(world, array.group))
        return advance(self, *args, **kwargs)

    with mock.patch.object(DynamoDBAdmissions, "advance", cancel_first):
        assert poller.deliver(poller.next())
    assert cancelled == [200]
    poller.drain()
    assert {j.state for j in admitted_once(world, array.group, 300)} == {S.CANCELLED}


def test_a_rejected_array_is_rejected_whole_though_the_limits_change_between_chunks(world, small_chunks):
    world, _ = world
    s = store(world)
    array = world.send(spec(array="0-299", resources={"gpus": 4}))
    policy = s.policy()
    s.set_policy(replace(policy, max_gpus_per_job=2))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    s.set_policy(policy)                                  # within limits again for the later chunks
    poller.drain()
    jobs = admitted_once(world, array.group, 300)
    assert {j.state for j in jobs} == {S.REJECTED} and "2" in jobs[-1].reason


def in_steps(world: Deployment, group: str, verb: str = "cancel") -> int:
    """`gqa cancel GROUP` (or hold, release, requeue) as the CLI makes it: each bounded step asked with
    the last's `next`; the last status."""
    token = None
    while True:
        answer = world.api.handler(rest_event("POST", f"/jobs/{group}/{verb}", arn=user_arn("alice"),
                                              query={"next": token} if token else None), API_CONTEXT)
        token = json.loads(answer["body"]).get("next") if answer["statusCode"] == 200 else None
        if token is None:
            return answer["statusCode"]


def get(world: Deployment, path: str) -> dict[str, Any]:
    answer = world.api.handler(rest_event("GET", path, arn=user_arn("bob")), API_CONTEXT)
    assert answer["statusCode"] == 200, answer
    return json.loads(answer["body"])


# -- approvals -------------------------------------------------------------------------------------

def test_an_array_awaiting_approval_is_announced_once_and_an_approval_reaches_the_rest(world, small_chunks):
    from gqa.adapters.clock import SystemClock
    from gqa.services.control import ControlService
    from gqa.services.submit import SubmitService

    world, _ = world
    s = store(world)
    policy = s.policy()
    s.set_policy(replace(policy, approval_gpus=1))
    told: list[tuple[str, str]] = []

    class Notifier:
        def notify(self, subject: str, message: str, *, kind: str, team: str | None = None) -> None:
            told.append((subject, message))

    intake = SqsIntake(world.client("sqs"), world.urls.intake, world.urls.wakeup)
    dynamo = DynamoDBAdmissions(world.client("dynamodb"), NAMES)
    service = SubmitService(s, SystemClock(), intake=intake, notifier=Notifier(), admissions=dynamo)
    [first] = SubmitService(s, SystemClock(), intake=intake).accept(spec(array="0-399", resources={"gpus": 2}),
                                                                   owner="alice")[:1]
    poller = Poller(world)

    def admit_next() -> None:
        record = poller.next()
        from gqa.adapters.aws.sqs_intake import parse_submission
        service.admit(parse_submission(record["body"]), delivery=record["messageId"])
        poller.sqs.delete_message(QueueUrl=poller.url, ReceiptHandle=record["receiptHandle"])

    admit_next()
    admit_next()
    assert len(told) == 1 and "400 jobs" in told[0][0]
    ControlService(s, SystemClock(), admissions=dynamo).approve([first.group], caller="carol")
    while poller.messages():
        admit_next()
    jobs = admitted_once(world, first.group, 400)
    assert {j.state for j in jobs} == {S.QUEUED} and len(told) == 1
    assert {j.reason for j in jobs} == {"approved by carol"}


def test_a_small_submission_takes_no_progress_item_and_one_message(world):
    world, _ = world
    job = world.send(spec(array="0-9"))
    poller = Poller(world)
    assert poller.drain() == 1
    admitted_once(world, job.group, 10)
    assert progress(world, job.group) is None


def test_tasks_with_wide_characters_are_written_in_transactions_dynamodb_takes(world):
    """DynamoDB sizes items in UTF-8 bytes: 100 tasks whose tags hold 120,000 bytes of CJK text
    (40,000 characters) pass 4 MB together, so they take more than one transaction."""
    world, _ = world
    sizes: list[int] = []
    world.session.events.register(   # this world's own session: every client of the test's functions
        "before-parameter-build.dynamodb.TransactWriteItems",
        lambda params, **_: sizes.append(len(params["TransactItems"])))
    array = world.send(spec(array="0-99", tags={f"note{i}": "界" * 2000 for i in range(20)}))

    assert Poller(world).drain() == 1
    admitted_once(world, array.group, 100)
    assert len([n for n in sizes if n > 1]) > 2     # refused over 4 MB (aws_limits), so split by bytes


def test_an_invocation_short_of_time_writes_a_smaller_chunk(world):
    from tests.aws.moto_support import LambdaContext

    class Late(LambdaContext):
        def get_remaining_time_in_millis(self) -> int:
            return 3_000          # under the admit function's reserve: one transaction's worth

    world, _ = world
    array = world.send(spec(array="0-2999"))
    poller = Poller(world)
    record = poller.next()
    assert world.admit.handler({"Records": [record]}, Late(function_name="gqa")) == {"batchItemFailures": []}
    poller.sqs.delete_message(QueueUrl=poller.url, ReceiptHandle=record["receiptHandle"])
    assert progress(world, array.group).next == SLICE
    chunk = chunk_tasks(store(world).get(array.first_id))
    assert chunk > SLICE and poller.drain() == -(-(3000 - SLICE) // chunk)   # whole chunks then
    admitted_once(world, array.group, 3000)
