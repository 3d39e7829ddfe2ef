"""The trigger Lambda handler, called directly with S3 "Object Created"
events in the shape EventBridge delivers them and with the SQS records of
its timer queue, on moto DynamoDB and SQS built from the synthesized data
stack, and S3. Time is a fake clock; the timer's delay is read from the
SendMessage call and its message handed to the handler, as SQS would."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field
from unittest import mock
from urllib.parse import quote_plus

import pytest
from moto import mock_aws

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import QueueUrls
from gqa.adapters.aws.sqs_intake import parse_submission
from gqa.adapters.aws.tables import PK, SK, TableNames
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.models import code
from gqa.models.burst import OVERDUE_AFTER, RECORD_KEY_BYTES
from gqa.ports import Inventory, Submission
from gqa.scheduling import Gpu
from tests.aws.deployed import create_queues, create_tables
from tests.aws.moto_support import FakeClock, LambdaContext, capture, emf, metric, refuse, session
from tests.builders import spec, trigger
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-trig-")
CHECKPOINTS = "gqa-checkpoints"
CONTEXT = LambdaContext(function_name="gqa-trigger")
TIMER_ARN = "arn:aws:sqs:us-east-1:123456789012:gqa-trig-trigger-timer"
CAROL = "arn:aws:iam::123456789012:user/carol"
ADMIN = "arn:aws:sts::123456789012:assumed-role/GqaAdmin/dave"
ACCESS = {"admins": ["arn:aws:sts::123456789012:assumed-role/GqaAdmin/*"]}   # GQA_ACCESS, as the api has it


# -- events as AWS sends them ---------------------------------------------------------------------

def object_created(key: str, *, bucket: str = "data", sequencer: str | None = None, version: str | None = None,
                   size: int = 1024) -> dict:
    """An S3 "Object Created" event as EventBridge delivers it (the key URL-encoded, as S3 sends it)."""
    obj = {"key": quote_plus(key, safe="/"), "size": size, "etag": uuid.uuid4().hex,
           "sequencer": sequencer or uuid.uuid4().hex[:18].upper()}
    if version is not None:
        obj["version-id"] = version
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Object Created", "source": "aws.s3",
            "account": "123456789012", "time": "2026-11-30T06:00:00Z", "region": "us-east-1",
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {"version": "0", "bucket": {"name": bucket}, "object": obj, "request-id": "N4N7GDK58NMKJ12R",
                       "requester": "123456789012", "source-ip-address": "10.0.0.1", "reason": "PutObject"}}


def sqs_record(body: str, message_id: str = "m-1", queue_arn: str = TIMER_ARN) -> dict:
    """One record of an SQS event as Lambda delivers it (by default, from the timer queue)."""
    return {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body,
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000",
                           "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": "1700000000000"},
            "messageAttributes": {}, "md5OfBody": "0", "eventSource": "aws:sqs", "eventSourceARN": queue_arn,
            "awsRegion": "us-east-1"}


# -- the deployment --------------------------------------------------------------------------------

@dataclass
class World:
    module: object
    urls: QueueUrls
    clock: FakeClock
    sent: list[dict] = field(default_factory=list)       # SendMessage calls of the function's SQS client

    @property
    def timers(self) -> list[dict]:
        return [m for m in self.sent if m["QueueUrl"] == self.urls.trigger_timer]

    @property
    def service(self):
        return self.module.container().service

    def add(self, prefix: str = "incoming/", job=None, owner: str = "carol", **kwargs):
        kwargs.setdefault("debounce", 120)
        kwargs.setdefault("owner_arn", CAROL)
        job = job or spec(name="retrain")
        return self.service.add("data", prefix, job.model_dump_json(), owner, **kwargs)

    def members(self, team: str, *members: str) -> None:
        """The team's members as the deploy or `gqa quota set TEAM --members` writes them."""
        DynamoDBStore(session().client("dynamodb"), NAMES).set_team_members(team, members)

    def allow(self, *buckets) -> None:
        """The deployment file changed: GQA_TRIGGER_BUCKETS as the next deploy sets it."""
        os.environ["GQA_TRIGGER_BUCKETS"] = json.dumps(list(buckets))
        self.module.places.cache_clear()   # a new deploy starts new containers

    def put(self, key: str, **kwargs) -> dict:
        return self.module.handler(object_created(key, **kwargs), CONTEXT)

    def fire(self, n: int = -1, message_id: str = "m-1") -> dict:
        """Deliver the n-th timer message sent (its window has passed)."""
        timer = self.timers[n]
        self.clock.t += timer["DelaySeconds"]
        return self.module.handler({"Records": [sqs_record(timer["MessageBody"], message_id)]}, CONTEXT)

    def submissions(self) -> list[Submission]:
        sqs = session().client("sqs")
        out = []
        for url in self.urls.intake.values():
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                           VisibilityTimeout=0).get("Messages", [])
            out += [parse_submission(m["Body"]) for m in messages]
        return out


@pytest.fixture
def world():
    clock = FakeClock()
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        urls = create_queues(session().client("sqs"), prefix="gqa-trig-")
        session().client("s3").create_bucket(Bucket=CHECKPOINTS)
        DynamoDBStore(session().client("dynamodb"), NAMES).set_inventory(
            Inventory(gpus=tuple(Gpu(i, "a10g", 0.5, spot=True) for i in range(4))))
        env = {"GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings, "GQA_LEDGER_TABLE": NAMES.ledger,
               "GQA_TRIGGER_TIMER_QUEUE_URL": urls.trigger_timer, "GQA_CHECKPOINT_BUCKET": CHECKPOINTS,
               "GQA_TRIGGER_BUCKETS": json.dumps(["data"]), "GQA_ACCESS": json.dumps(ACCESS),
               "GQA_INTAKE_URLS": json.dumps({"high": urls.intake[0], "normal": urls.intake[1],
                                              "low": urls.intake[2]})}
        with mock.patch.dict(os.environ, env):
            from lambdas import trigger as module
            module.container.cache_clear()     # a fresh "container" per test: its clients are moto's
            module.places.cache_clear()
            with mock.patch.object(module, "SystemClock", lambda: clock):
                made = World(module, urls, clock)
                made.sent = capture(made.service.timer.client, "SendMessage")
                yield made
            module.container.cache_clear()


def env_of(submission: Submission) -> dict[str, str]:
    return json.loads(submission.spec_json)["env"]


# -- bursts ----------------------------------------------------------------------------------------

def test_a_burst_of_objects_becomes_one_submission_with_every_key(world):
    trigger = world.add(debounce=120)
    for n, key in enumerate(("incoming/a.csv", "incoming/b.csv", "incoming/c d.csv")):
        answer = world.put(key)
        assert answer["triggers"][0]["step"] == ("open" if n == 0 else "append")
        world.clock.t += 10

    assert [t["DelaySeconds"] for t in world.timers] == [120]        # one timer, the window long
    assert world.submissions() == []                                   # nothing until the window ends
    closed = world.fire()
    assert closed == {"batchItemFailures": []}

    [submission] = world.submissions()
    assert submission.owner == "carol"                                 # the trigger's owner
    assert len(submission.job_ids) == 1
    env = env_of(submission)
    assert env["GQA_TRIGGER_ID"] == trigger.id and env["GQA_TRIGGER_BUCKET"] == "data"
    assert env["GQA_TRIGGER_KEYS"].split("\n") == ["incoming/a.csv", "incoming/b.csv", "incoming/c d.csv"]
    assert env["GQA_TRIGGER_COUNT"] == "3" and "GQA_TRIGGER_MANIFEST" not in env


def test_admission_queues_the_job_with_the_keys_in_its_environment(world):
    world.add()
    world.put("incoming/a.csv")
    world.put("incoming/b.csv")
    world.fire()
    [message] = session().client("sqs").receive_message(QueueUrl=world.urls.intake[1], WaitTimeSeconds=0)["Messages"]

    from lambdas import admit
    admit.container.cache_clear()
    intake_arn = "arn:aws:sqs:us-east-1:123456789012:gqa-trig-intake-normal"
    answer = admit.handler({"Records": [sqs_record(message["Body"], queue_arn=intake_arn)]}, CONTEXT)
    admit.container.cache_clear()
    assert answer == {"batchItemFailures": []}
    [job] = DynamoDBStore(session().client("dynamodb"), NAMES).list()
    assert (job.state.value, job.owner, job.name) == ("QUEUED", "carol", "retrain")
    # the spec's env is what a Batch container gets (BatchCompute.environment)
    assert job.spec.env["GQA_TRIGGER_KEYS"] == "incoming/a.csv\nincoming/b.csv"
    assert job.spec.env["GQA_TRIGGER_COUNT"] == "2"


def test_a_redelivered_event_and_an_overwrite_are_counted_once(world):
    world.add()
    event = object_created("incoming/a.csv", sequencer="0A")
    world.module.handler(event, CONTEXT)
    again = world.module.handler(event, CONTEXT)                                      # EventBridge retried it
    overwrite = world.put("incoming/a.csv", sequencer="0B")                            # a second PUT of the key
    versioned = world.module.handler(object_created("incoming/b.csv", sequencer="0C", version="v1"), CONTEXT)
    world.module.handler(object_created("incoming/b.csv", sequencer="0C", version="v1"), CONTEXT)
    assert again["triggers"][0]["step"] == "duplicate"
    # the store reads no key list per object: an overwrite is counted as a join, and its key is one item
    assert overwrite["triggers"][0]["step"] == "append"
    assert versioned["triggers"][0]["step"] == "append"

    world.fire()
    world.clock.t += 60
    late_retry = world.module.handler(event, CONTEXT)                  # redelivered after the burst closed
    assert late_retry["triggers"][0]["step"] == "duplicate"
    # it scheduled a timer before finding it was a duplicate: that timer names a burst never opened
    assert world.fire(message_id="m-2") == {"batchItemFailures": []}
    [submission] = world.submissions()
    assert env_of(submission)["GQA_TRIGGER_KEYS"] == "incoming/a.csv\nincoming/b.csv"
    assert env_of(submission)["GQA_TRIGGER_COUNT"] == "2"


def test_an_object_after_the_close_opens_the_next_burst(world):
    world.add(debounce=60)
    world.put("incoming/a.csv")
    world.fire(0)
    world.clock.t += 5
    assert world.put("incoming/b.csv")["triggers"][0]["step"] == "open"
    world.fire(1, message_id="m-2")

    first, second = world.submissions()
    assert {env_of(first)["GQA_TRIGGER_KEYS"], env_of(second)["GQA_TRIGGER_KEYS"]} == {"incoming/a.csv",
                                                                                          "incoming/b.csv"}
    assert first.job_ids != second.job_ids


def test_a_redelivered_timer_submits_nothing_more(world):
    world.add()
    world.put("incoming/a.csv")
    world.fire()
    again = world.fire(message_id="m-1-again")
    assert again == {"batchItemFailures": []}
    assert len(world.submissions()) == 1


def test_a_timer_that_fails_to_send_is_retried_with_the_same_reserved_ids(world):
    world.add()
    world.put("incoming/a.csv")
    intake_client = world.service.intake.client
    refuse(intake_client, "SendMessage", "AccessDenied", times=1)     # the submission is held, not sent
    failed = world.fire()
    assert failed == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert world.submissions() == []

    world.fire(message_id="m-1")                                       # SQS delivers the timer again
    [submission] = world.submissions()
    timer = json.loads(world.timers[0]["MessageBody"])
    held = DynamoDBTriggerStore(session().client("dynamodb"), NAMES).held_submission(
        timer["trigger_id"], timer["burst_id"])
    assert held is not None and submission.job_ids == held.job_ids   # the ids reserved on the first try


def test_objects_racing_to_open_share_one_burst(world):
    trigger = world.add()
    store = world.service.store
    real_open_burst = store.open_burst
    # both objects read "no burst open" before either writes: the second's open loses and it appends
    raced = {"done": False}

    def open_burst(trigger_id):
        found = real_open_burst(trigger_id)
        if not raced["done"]:
            raced["done"] = True
            world.put("incoming/first.csv")
        return found

    with mock.patch.object(store, "open_burst", open_burst):
        answer = world.put("incoming/second.csv")
    assert answer["triggers"][0]["step"] == "append"
    burst = store.open_burst(trigger.id)
    # the loser's timer names a burst that never opened: it closes nothing
    stray = [t for t in world.timers if json.loads(t["MessageBody"])["burst_id"] != burst.id]
    assert len(stray) == 1
    world.module.handler({"Records": [sqs_record(stray[0]["MessageBody"], "stray")]}, CONTEXT)
    assert store.open_burst(trigger.id) == burst and world.submissions() == []

    world.fire(world.timers.index(next(t for t in world.timers if t not in stray)), message_id="m-2")
    [submission] = world.submissions()
    assert env_of(submission)["GQA_TRIGGER_KEYS"] == "incoming/first.csv\nincoming/second.csv"


def test_a_burst_whose_timer_was_lost_is_closed_by_the_next_object(world):
    world.add(debounce=60)
    world.put("incoming/a.csv")
    world.clock.t += 60 + OVERDUE_AFTER                    # the timer went to the dead-letter queue
    answer = world.put("incoming/b.csv")
    assert answer["triggers"][0]["step"] == "open"
    [submission] = world.submissions()
    assert env_of(submission)["GQA_TRIGGER_KEYS"] == "incoming/a.csv"


def test_a_job_over_the_queue_limits_by_now_is_dropped_with_the_reason_and_not_retried(world, caplog):
    world.add(job=spec(name="huge", resources={"gpus": 8}))         # valid, but the queue has 4 GPUs
    world.put("incoming/a.csv")
    assert world.fire() == {"batchItemFailures": []}                 # consumed: a retry would fail the same way
    assert world.fire(message_id="m-again") == {"batchItemFailures": []}
    assert world.submissions() == []
    dropped = [r for r in caplog.records if r.getMessage() == "closed a burst"]
    assert [(r.levelname, r.action) for r in dropped] == [("WARNING", "dropped")] * 2
    assert dropped[0].reason == "rejected: asks for 8 GPUs; the queue has 4"


# -- triggers come and go ------------------------------------------------------------------------

def test_a_removed_trigger_stops_matching_and_its_open_burst_is_dropped(world):
    trigger = world.add()
    world.put("incoming/a.csv")
    world.service.remove(trigger.id)
    assert world.put("incoming/b.csv") == {"action": "no trigger matches", "triggers": []}
    assert world.fire() == {"batchItemFailures": []}
    assert world.submissions() == []


def test_a_bursts_job_runs_the_triggers_code_though_the_bundle_expired_since(world, caplog):
    s3 = session().client("s3")
    data = b"the owner's directory, bundled"
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    s3.put_object(Bucket=CHECKPOINTS, Key=code.key_of(digest), Body=data)     # `gqa trigger add` uploaded it
    kept = world.add(job=spec(name="retrain", code=digest))
    s3.delete_object(Bucket=CHECKPOINTS, Key=code.key_of(digest))             # 30 days on, the lifecycle's expiry
    world.put("incoming/a.csv")
    assert world.fire() == {"batchItemFailures": []}
    [submission] = world.submissions()
    assert json.loads(submission.spec_json)["code"] == digest
    assert s3.get_object(Bucket=CHECKPOINTS, Key=code.key_of(digest))["Body"].read() == data   # where jobs fetch it

    world.service.remove(kept.id)                                               # its copy goes with it
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=CHECKPOINTS)["Contents"]] == [code.key_of(digest)]

    lost = world.add(prefix="late/", job=spec(name="retrain", code=digest))
    s3.delete_object(Bucket=CHECKPOINTS, Key=code.key_of(digest))
    s3.delete_object(Bucket=CHECKPOINTS, Key=code.trigger_key_of(lost.id, digest))
    world.put("late/b.csv")
    assert world.fire() == {"batchItemFailures": []}
    assert len(world.submissions()) == 1              # the first burst's alone: no job that fails every attempt
    [dropped] = [r for r in caplog.records if getattr(r, "action", None) == "dropped"]
    assert dropped.levelname == "WARNING" and dropped.reason.startswith(f"the job's code {digest} is no longer stored")


def test_objects_outside_the_pattern_and_gqa_manifests_match_nothing(world):
    world.add(prefix="", suffix=".csv")
    assert world.put("x.parquet")["action"] == "no trigger matches"
    assert world.put("gqa-trigger-manifests/tr-0/b.csv")["action"] == "no trigger matches"
    assert world.put("y.csv", bucket="other-bucket")["action"] == "no trigger matches"
    assert world.put("y.csv")["action"] == "counted"


def test_every_matching_trigger_counts_the_object(world):
    one, two = world.add(prefix="incoming/"), world.add(prefix="incoming/images/")
    answer = world.put("incoming/images/cat.png")
    assert {t["trigger_id"] for t in answer["triggers"]} == {one.id, two.id}
    assert world.put("incoming/notes.txt")["triggers"][0]["trigger_id"] == one.id


# -- triggers the deployment no longer allows -------------------------------------------------------

@pytest.mark.parametrize("bucket, prefix, key, allowed, reason", [
    # gqa's own bucket, even where the deployment lists it: each checkpoint would start a job
    (CHECKPOINTS, "", "checkpoints/7/latest", ["data", CHECKPOINTS], "holds the jobs' checkpoints and the trigger "
                                                                       "manifests"),
    ("data", "incoming/", "incoming/a.csv", [{"name": "data", "prefixes": ["curated/"]}],
     "in data, triggers may watch only under 1 prefix(es): 'curated/'"),
    ("data", "incoming/", "incoming/a.csv", ["raw-data"], "'data' is not one of this deployment's 1 trigger bucket(s)"),
    ("data", "incoming/", "incoming/a.csv", [], "this deployment lists no trigger buckets"),
])
def test_a_trigger_no_longer_allowed_is_ignored_logged_and_counted(world, capsys, caplog, bucket, prefix, key,
                                                                    allowed, reason):
    # added before the deployment file changed (the service alone checks nothing it is not given)
    trigger = world.service.add(bucket, prefix, spec().model_dump_json(), "carol", 60)
    world.allow(*allowed)
    capsys.readouterr()
    answer = world.put(key, bucket=bucket)
    assert answer == {"action": "ignored", "triggers": [{"trigger_id": trigger.id, "burst_id": "", "step": "ignored"}]}
    assert world.timers == [] and world.submissions() == []
    [warning] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert warning.trigger_id == trigger.id and reason in warning.reason
    docs = emf(capsys.readouterr().out)
    assert metric(docs, "TriggerObjectsIgnored") == [1] and metric(docs, "TriggerObjects") == [0]


def test_an_allowed_trigger_beside_an_ignored_one_still_counts(world, capsys):
    kept, stale = world.add(prefix="incoming/"), world.add(prefix="")
    world.allow({"name": "data", "prefixes": ["incoming/"]})
    capsys.readouterr()
    answer = world.put("incoming/a.csv")
    assert answer["action"] == "counted"
    assert {t["trigger_id"]: t["step"] for t in answer["triggers"]} == {kept.id: "open", stale.id: "ignored"}
    docs = emf(capsys.readouterr().out)
    assert metric(docs, "TriggerObjects") == [1] and metric(docs, "TriggerObjectsIgnored") == [1]


def test_a_burst_opened_before_the_configuration_changed_is_dropped_at_its_close(world, caplog):
    world.add()
    world.put("incoming/a.csv")
    world.allow("raw-data")
    assert world.fire() == {"batchItemFailures": []}
    assert world.submissions() == []
    [closed] = [r for r in caplog.records if r.getMessage() == "closed a burst"]
    assert (closed.levelname, closed.action) == ("WARNING", "dropped")
    assert "'data' is not one of this deployment's 1 trigger bucket(s) (raw-data)" in closed.reason


# -- the owner's rights, judged again at each burst ----------------------------------------------------

def test_an_owner_still_in_the_team_submits_the_burst_for_it(world):
    world.members("vision", "carol")
    world.add(job=spec(name="retrain", team="vision"))
    world.put("incoming/a.csv")
    world.fire()
    [submission] = world.submissions()
    assert (submission.owner, json.loads(submission.spec_json)["team"]) == ("carol", "vision")


def test_an_owner_removed_from_the_team_has_the_burst_dropped_and_nothing_submitted(world, capsys, caplog):
    world.members("vision", "carol", "bob")
    trigger = world.add(job=spec(name="retrain", team="vision"))
    world.put("incoming/a.csv")
    world.members("vision", "bob")                                    # carol left the team
    capsys.readouterr()
    assert world.fire() == {"batchItemFailures": []}                  # consumed: a retry would fail the same way
    assert world.fire(message_id="m-1-again") == {"batchItemFailures": []}
    assert world.submissions() == []
    timer = json.loads(world.timers[0]["MessageBody"])
    store = DynamoDBTriggerStore(session().client("dynamodb"), NAMES)
    assert store.held_submission(timer["trigger_id"], timer["burst_id"]) is None      # no ids reserved either
    first, again = [r for r in caplog.records if r.getMessage() == "closed a burst"]
    assert (first.levelname, first.action, first.not_permitted) == ("WARNING", "dropped", True)
    assert first.reason.startswith(f"carol may no longer submit the jobs of trigger {trigger.id} for team vision: "
                                   "carol is not a member of team vision (members: bob)")
    assert (again.action, again.reason) == ("dropped", first.reason)  # the redelivered timer: the same, once
    docs = emf(capsys.readouterr().out)
    assert metric(docs, "TriggerBurstsNotPermitted") == [1] and metric(docs, "TriggerBurstsDropped") == [1, 1]


def test_an_admin_owner_submits_for_the_stored_team(world):
    world.members("vision", "bob")
    world.add(job=spec(name="retrain", team="vision"), owner="GqaAdmin/dave", owner_arn=ADMIN)
    world.put("incoming/a.csv")
    world.fire()
    [submission] = world.submissions()
    assert (submission.owner, json.loads(submission.spec_json)["team"]) == ("GqaAdmin/dave", "vision")


def stored_before_the_arn_was_kept(job) -> str:
    """A trigger item as an earlier version wrote it: its wire form without owner_arn."""
    old = trigger(id="tr-0a1d", owner="carol", spec_json=job.model_dump_json()).to_dict()
    del old["owner_arn"]
    session().client("dynamodb").put_item(TableName=NAMES.settings, Item={
        PK: {"S": "trigger"}, SK: {"S": old["id"]}, "json": {"S": json.dumps(old)}})
    return old["id"]


def test_an_old_trigger_without_the_arn_is_judged_by_its_owners_name(world):
    world.members("vision", "carol")
    stored_before_the_arn_was_kept(spec(name="retrain", team="vision"))
    world.put("incoming/a.csv")
    world.fire()
    [submission] = world.submissions()
    assert (submission.owner, json.loads(submission.spec_json)["team"]) == ("carol", "vision")


def test_an_old_trigger_whose_owner_only_an_arn_pattern_names_is_dropped_saying_how_to_mend_it(world, caplog):
    world.members("vision", "arn:aws:iam::123456789012:user/car*")
    stored_before_the_arn_was_kept(spec(name="retrain", team="vision"))
    world.put("incoming/a.csv")
    world.fire()
    assert world.submissions() == []
    [closed] = [r for r in caplog.records if r.getMessage() == "closed a burst"]
    assert (closed.action, closed.not_permitted) == ("dropped", True)
    assert "added before gqa kept its owner's ARN" in closed.reason and "adding it again" in closed.reason


# -- large bursts ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_large_burst_writes_a_manifest_and_counts_past_the_record_cap(world):
    world.add()
    keys = [f"incoming/shard-{n:04d}-" + "x" * 980 for n in range(70)]     # 1,000 bytes each
    for key in keys:
        world.put(key)
    world.fire()

    [submission] = world.submissions()
    env = env_of(submission)
    listed = RECORD_KEY_BYTES // 1000                                      # 65 fit in the record
    assert env["GQA_TRIGGER_COUNT"] == "70"
    assert env["GQA_TRIGGER_KEYS"].split("\n") == keys[:4]                # what fits in 4 KiB inline
    manifest = env["GQA_TRIGGER_MANIFEST"]
    assert manifest.startswith(f"s3://{CHECKPOINTS}/gqa-trigger-manifests/")
    body = session().client("s3").get_object(Bucket=CHECKPOINTS, Key=manifest.split("/", 3)[3])["Body"].read()
    assert body.decode().splitlines() == keys[:listed]


# -- what the handler drops --------------------------------------------------------------------

@pytest.mark.parametrize("event", [
    {"detail-type": "Object Deleted", "detail": {"bucket": {"name": "data"}, "object": {"key": "k"}}},
    {"detail-type": "Object Created", "detail": {"bucket": {"name": "data"}}},
    {"detail-type": "Object Created"},
])
def test_a_malformed_or_foreign_event_is_dropped(world, event):
    world.add()
    assert world.module.handler(event, CONTEXT) == {"action": "dropped", "reason": "malformed event"}


def test_a_malformed_timer_message_is_consumed(world):
    answer = world.module.handler({"Records": [sqs_record("not json")]}, CONTEXT)
    assert answer == {"batchItemFailures": []}


# -- what it costs -----------------------------------------------------------------------------

def test_aws_calls_per_object_and_per_burst(world):
    world.add()
    dynamodb, sqs = capture(world.service.store.client), capture(world.service.timer.client)

    def taken() -> list[str]:
        names = [c["_operation"] for c in dynamodb + sqs]
        del dynamodb[:], sqs[:]
        return sorted(names)

    world.put("incoming/a.csv")
    opening = taken()
    world.put("incoming/b.csv")
    joining = taken()
    world.fire()
    closing = taken()

    # list the triggers, read the open burst, count (marker, gate, key in one transaction); the first sends the timer
    assert joining == ["GetItem", "Query", "TransactWriteItems"]
    assert opening == sorted(joining + ["SendMessage"])
    # close: read the burst, seal it (one transaction), read its keys (one Query) and list them on the
    # closed record, look for a kept submission, read the trigger; the teams' members now (one Query);
    # accept: the settings partition (Queries), reserve the ids; keep the submission, send it, mark the burst
    assert closing == sorted(["GetItem", "TransactWriteItems", "Query", "UpdateItem", "GetItem", "GetItem", "Query",
                              "Query", "Query", "Query", "UpdateItem",
                              "UpdateItem", "SendMessage", "UpdateItem"])


def test_objects_and_bursts_are_emitted_as_metrics(world, capsys):
    world.add()
    event = object_created("incoming/a.csv")
    capsys.readouterr()
    world.module.handler(event, CONTEXT)
    world.module.handler(event, CONTEXT)                  # retried: counted before
    world.put("incoming/b.csv")
    world.put("elsewhere/c.csv")                          # no trigger matches
    world.fire()
    world.fire(message_id="m-1-again")                    # redelivered: submits nothing more
    docs = emf(capsys.readouterr().out)
    assert {d["service"] for d in docs} == {"gqa-trigger"}
    assert metric(docs, "TriggerObjects") == [1, 0, 1, 0]
    assert metric(docs, "TriggerBursts") == [1] and metric(docs, "TriggerBurstsDropped") == [0]
