"""Job notices on SNS (moto): each user's SQS subscription, filtered on the
`user` attribute, gets that user's notices only; the store publishes the
moves it wrote, and a publish that fails is kept and sent with the next
ones, never failing the write."""

from __future__ import annotations

import json
import os
import time
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.sns_notices import NoticingStore, SnsNotices
from gqa.adapters.aws.tables import TableNames
from gqa.models.job import JobState as S
from gqa.models.notices import Notice
from gqa.ports import Change, Inventory
from gqa.services.submit import SubmitService
from tests.aws.deployed import create_tables
from tests.aws.moto_support import SerializedClient, session
from tests.builders import gpus, spec
from tests.contract.conftest import FAKE_AWS
from tests.services.fakes import FakeClock

pytestmark = pytest.mark.aws


@pytest.fixture
def aws():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        sns = session().client("sns")
        topic = sns.create_topic(Name="gqa-test-notices")["TopicArn"]
        yield sns, topic


def subscribe(sns, topic: str, user: str) -> str:
    """An SQS queue subscribed to `user`'s notices only, as `aws sns subscribe ... --attributes` would."""
    sqs = session().client("sqs")
    url = sqs.create_queue(QueueName=f"notices-{user}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn,
                  Attributes={"FilterPolicy": json.dumps({"user": [user]}), "RawMessageDelivery": "true"})
    return url


def received(url: str) -> list[dict]:
    sqs = session().client("sqs")
    out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    return [{"body": m["Body"], **{k: v["StringValue"] for k, v in m.get("MessageAttributes", {}).items()}}
            for m in out.get("Messages", [])]


def notice(user: str, key: str, event: str = "end") -> Notice:
    return Notice(key, event, None, user, "vision", f"gqa: job {key} of {user}", f"text of {key}")


def test_each_user_gets_only_their_own_notices(aws):
    sns, topic = aws
    ana, bob = subscribe(sns, topic, "ana"), subscribe(sns, topic, "bob")
    assert SnsNotices(sns, topic).publish([notice("ana", "1.1.succeeded"), notice("bob", "2.1.failed", "fail"),
                                           notice("ana", "3.1.running", "begin")]) == 3
    got = received(ana)
    assert sorted(m["key"] for m in got) == ["1.1.succeeded", "3.1.running"]
    assert {(m["user"], m["team"]) for m in got} == {("ana", "vision")}
    assert [(m["key"], m["event"], m["body"]) for m in received(bob)] == [("2.1.failed", "fail", "text of 2.1.failed")]


class Flaky:
    """An SNS client whose first PublishBatch fails, as a throttled or unreachable SNS would."""

    def __init__(self, client):
        self.client, self.failures = client, 1

    def publish_batch(self, **kwargs):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("SNS unreachable")
        return self.client.publish_batch(**kwargs)


def test_a_failed_publish_is_kept_and_sent_with_the_next(aws, caplog):
    sns, topic = aws
    ana = subscribe(sns, topic, "ana")
    notices = SnsNotices(Flaky(sns), topic)
    assert notices.publish([notice("ana", "1.1.succeeded")]) == 0
    assert "kept for the next try" in caplog.text
    assert notices.publish([notice("ana", "2.1.succeeded")]) == 2
    assert sorted(m["key"] for m in received(ana)) == ["1.1.succeeded", "2.1.succeeded"]
    assert notices.unsent == []


def test_the_store_tells_the_moves_it_wrote_and_a_failed_publish_never_fails_the_write(aws):
    sns, topic = aws
    ana = subscribe(sns, topic, "ana")
    names = TableNames.prefixed("gqa-test-")
    create_tables(session().client("dynamodb"), names)
    notices = SnsNotices(Flaky(sns), topic)
    store = NoticingStore(SerializedClient(session().client("dynamodb")), names, notices=notices)
    store.set_inventory(Inventory(gpus=gpus(2)))
    clock = FakeClock(1_000_000.0)
    [job] = SubmitService(store, clock).submit(spec(owner="ana", notify={"events": ["begin", "end"]}))
    [quiet] = SubmitService(store, clock).submit(spec(owner="ana"))
    for j in (job, quiet):
        store.apply([Change(j.id, S.QUEUED, S.STARTING, "claimed", clock.now(), {"attempts": 1, "assigned": (0,)})])
        [running] = store.apply([Change(j.id, S.STARTING, S.RUNNING, "started", clock.now(), {})])
        assert running.state == S.RUNNING
        if j is job:   # its publish failed (Flaky): the move is written all the same, its notice kept
            assert [n.key for n in notices.unsent] == [f"{job.id}.1.running"]
    assert notices.unsent == []   # sent at the next write (the quiet job's, which tells nothing of its own)
    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "exited 0", clock.now(), {"exit_code": 0})])
    got = received(ana)
    assert sorted((m["key"], m["event"]) for m in got) == [(f"{job.id}.1.running", "begin"),
                                                          (f"{job.id}.1.succeeded", "end")]
    assert all(quiet.id not in m["key"] for m in got)


@pytest.mark.slow
def test_the_functions_tell_a_job_s_start_and_end_to_its_owner_only(monkeypatch):
    """Through the real handlers: api -> admit -> dispatch -> Batch's events -> reconcile."""
    from tests.aws.fake_batch import CONTEXT, FakeBatch, deployment

    with deployment(time.time()) as world:
        sns = world.client("sns")
        topic = sns.create_topic(Name="gqa-life-notices")["TopicArn"]
        monkeypatch.setenv("GQA_NOTICES_TOPIC_ARN", topic)
        mine, theirs = subscribe(sns, topic, "alice"), subscribe(sns, topic, "bob")
        world.dispatch.container.cache_clear()   # cold starts that read the topic's setting
        world.reconcile.container.cache_clear()
        batch = FakeBatch(world.dispatch.container().compute.client)
        [job_id] = world.send(spec(name="train", notify={"events": ["begin", "end"]})).ids
        assert world.admit.handler({"Records": world.receive()}, CONTEXT) == {"batchItemFailures": []}
        world.dispatch.handler(world.wakeups(), CONTEXT)
        [submitted] = batch.take_new()
        now = world.clock.now()
        world.reconcile.handler(batch.event(submitted, "RUNNING", at=now + 10, started=now + 10), CONTEXT)
        world.reconcile.handler(batch.event(submitted, "SUCCEEDED", at=now + 70, started=now + 10, exit_code=0),
                                CONTEXT)
        got = sorted(received(mine), key=lambda m: m["key"])
        assert [(m["key"], m["event"], m["user"]) for m in got] == [
            (f"{job_id}.1.running", "begin", "alice"), (f"{job_id}.1.succeeded", "end", "alice")]
        assert f"job {job_id} (train) of alice" in got[1]["body"] and "completed" in got[1]["body"]
        assert received(theirs) == []


@pytest.mark.slow
def test_a_pending_job_cancelled_through_the_api_tells_its_end(monkeypatch):
    from tests.aws.api_gateway import rest_event
    from tests.aws.fake_batch import API_CONTEXT, CONTEXT, deployment, user_arn

    with deployment(time.time()) as world:
        sns = world.client("sns")
        topic = sns.create_topic(Name="gqa-life-notices")["TopicArn"]
        monkeypatch.setenv("GQA_NOTICES_TOPIC_ARN", topic)
        world.api.container.cache_clear()
        world.dispatch.container()                 # the cold start registers the GPUs admission checks
        mine = subscribe(sns, topic, "alice")
        [job_id] = world.send(spec(name="train", notify={"events": ["end"]}, hold=True)).ids
        assert world.admit.handler({"Records": world.receive()}, CONTEXT) == {"batchItemFailures": []}
        answer = world.api.handler(rest_event("POST", f"/jobs/{job_id}/cancel", arn=user_arn("alice")), API_CONTEXT)
        assert answer["statusCode"] == 200, answer
        [got] = received(mine)
        assert (got["key"], got["event"]) == (f"{job_id}.0.cancelled", "end")
        assert f"job {job_id} (train) of alice" in got["body"] and "was cancelled" in got["body"]
