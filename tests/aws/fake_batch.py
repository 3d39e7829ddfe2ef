"""A whole deployment on moto, in-process, and a stand-in for AWS Batch's side
of it: the Lambda handlers (api, admit, dispatch, reconcile) wired to moto's
DynamoDB, SQS, S3, Batch and CloudWatch Logs, and FakeBatch, which reads the
SubmitJob calls the dispatcher really made and answers with the "Batch Job
State Change" events EventBridge would deliver (moto's Batch runs no container
and emits no events). A submission goes in as API Gateway hands it to the api
function: a REST proxy event with the caller's verified IAM identity.

Used by tests/aws/test_lifecycle.py and benchmarks/aws_calls_per_job.py."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from unittest import mock

import boto3
from moto import mock_aws

from gqa.adapters.aws import items, views
from gqa.adapters.aws.batch_logs import DEFAULT_GROUP
from gqa.adapters.aws.resources import Pool, QueueUrls
from gqa.adapters.aws.tables import TableNames
from gqa.adapters.clock import SystemClock
from gqa.http import wire
from gqa.models import errors
from gqa.models.job import JobRecord
from gqa.models.spec import JobSpec
from gqa.runtime.s3 import MANIFEST
from gqa.runtime.storage import POINTER
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.aws_limits import LIMITS
from tests.aws.lean_moto import lean_dynamodb
from tests.aws.deployed import create_queues, create_tables
from tests.aws.moto_support import LambdaContext, create_batch

ACCOUNT = "123456789012"
REGION = "us-east-1"
FAKE_AWS = {"AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing"}
NAMES = TableNames.prefixed("gqa-life-")
BUCKET = "gqa-life-checkpoints"
CHECKPOINT_PREFIX = "checkpoints"
JOB_DEFINITION = "gqa-train"
POOLS = (Pool("a10g", spot=True, max_gpus=8, price=0.4), Pool("a10g", spot=False, max_gpus=4, price=1.0))
RECLAIM = "Host EC2 (instance i-0abc) terminated."
WAKEUP_EVENT = {"Records": [{"messageId": "wake-1", "body": '{"wake": true}', "eventSource": "aws:sqs",
                             "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:gqa-life-wakeup"}]}


CONTEXT = LambdaContext(function_name="gqa")
API_CONTEXT = LambdaContext(function_name="gqa-api")
ACCESS = {"admins": ["root-ops"], "approvers": ["carol"]}     # the api function's roles (GQA_ACCESS)


class VirtualClock:
    """The control plane's time (SystemClock is patched to read it), so a test
    can jump past a retry's backoff instead of sleeping through it."""

    def __init__(self, now: float):
        self.t = now

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class Deployment:
    """The handler modules, with their containers' wiring cleared, and what
    they were deployed against."""

    api: ModuleType
    admit: ModuleType
    dispatch: ModuleType
    reconcile: ModuleType
    urls: QueueUrls
    clock: VirtualClock
    session: boto3.session.Session

    def client(self, service: str) -> Any:
        return self.session.client(service)

    def send(self, job_spec: JobSpec, *, owner: str = "alice") -> list[JobRecord]:
        """POST /jobs by IAM user `owner`, as API Gateway hands it to the api
        function: checks, ids reserved, one message on the tier's intake queue.
        Returns the jobs as accepted (not yet written); a refusal or failure is
        raised as the domain error the API named (as the CLI raises it)."""
        event = rest_event("POST", "/jobs", arn=user_arn(owner),
                           body={"spec": job_spec.model_dump(mode="json"), "environment": {}})
        answer = self.api.handler(event, API_CONTEXT)
        data = json.loads(answer["body"])
        if answer["statusCode"] != 202:
            kind = getattr(errors, data.get("error", ""), None)
            if isinstance(kind, type) and issubclass(kind, errors.GqaError):
                raise kind(data["message"])
            raise RuntimeError(f"the api function answered {answer['statusCode']}: {data}")
        return wire.submitted_from_dict(data)

    def wakeups(self) -> dict[str, Any]:
        """What Lambda's poller hands the dispatch function: the wake-up queue's
        messages as one SQS event (a bare wake-up if none is waiting)."""
        return {"Records": self.receive(url=self.urls.wakeup)} if self.wakeups_waiting() else WAKEUP_EVENT

    def wakeups_waiting(self) -> bool:
        out = self.client("sqs").get_queue_attributes(QueueUrl=self.urls.wakeup,
                                                      AttributeNames=["ApproximateNumberOfMessages"])
        return int(out["Attributes"]["ApproximateNumberOfMessages"]) > 0

    def receive(self, tier: int = 1, *, url: str | None = None) -> list[dict[str, Any]]:
        """What Lambda's poller hands the admit function: received messages as SQS event records."""
        url = url or self.urls.intake[tier]
        sqs = self.client("sqs")
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        records: list[dict[str, Any]] = []
        while True:
            out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                      AttributeNames=["All"], MessageAttributeNames=["All"])
            messages = out.get("Messages", [])
            if not messages:
                return records
            for m in messages:
                records.append({"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"],
                                "body": m["Body"], "attributes": m.get("Attributes", {}),
                                "messageAttributes": m.get("MessageAttributes", {}), "md5OfBody": m["MD5OfBody"],
                                "eventSource": "aws:sqs", "eventSourceARN": arn, "awsRegion": REGION})
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])   # the poller's delete

    def write_checkpoint(self, job_id: str, step: int) -> str:
        """A complete checkpoint as gqa.runtime.s3 leaves it: files, then the
        manifest, then the `latest` pointer; returns the URI S3Checkpoints reports."""
        s3 = self.client("s3")
        base = f"{CHECKPOINT_PREFIX}/{job_id}/"
        name = f"ckpt-{step}"
        s3.put_object(Bucket=BUCKET, Key=f"{base}{name}/model.pt", Body=b"weights")
        s3.put_object(Bucket=BUCKET, Key=f"{base}{name}/{MANIFEST}", Body=json.dumps({"files": ["model.pt"]}))
        s3.put_object(Bucket=BUCKET, Key=f"{base}{POINTER}", Body=name.encode())
        return f"s3://{BUCKET}/{base}{name}"


@contextmanager
def deployment(now: float, session: boto3.session.Session | None = None,
               pools: tuple[Pool, ...] = POOLS) -> Iterator[Deployment]:
    """Every resource the stack would create, on moto, and the handlers'
    environment pointing at them. The handlers build their clients with
    boto3.client(), i.e. from boto3's default session: it is `session` here,
    so hooks registered on its events before a cold start see every call.
    The handlers' clock and their stores' caches follow the virtual clock."""
    session = session or boto3.session.Session(region_name=REGION)
    LIMITS.install(session)   # what AWS refuses and moto does not
    clock = VirtualClock(now)
    with ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, FAKE_AWS))
        stack.enter_context(mock_aws(config={"batch": {"use_docker": False}}))
        stack.enter_context(lean_dynamodb())   # a long run of lives fits in memory (lean_moto.py)
        stack.enter_context(mock.patch.object(boto3, "DEFAULT_SESSION", session))
        # the control plane's clock (submit times, retry backoff, not_before) is the virtual one
        stack.enter_context(mock.patch.object(SystemClock, "now", lambda self: clock.now()))
        stack.enter_context(mock.patch.object(views, "monotonic", clock.now))
        stack.enter_context(mock.patch.object(items, "wall_clock", clock.now))   # the writes' `changed` stamps
        create_tables(session.client("dynamodb"), NAMES)
        urls = create_queues(session.client("sqs"), prefix="gqa-life-")
        create_batch(session, pools, (JOB_DEFINITION,))
        session.client("s3").create_bucket(Bucket=BUCKET)
        session.client("logs").create_log_group(logGroupName=DEFAULT_GROUP)
        stack.enter_context(mock.patch.dict(os.environ, {
            "GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings, "GQA_LEDGER_TABLE": NAMES.ledger,
            "GQA_POOLS": json.dumps([{"gpu_type": p.gpu_type, "spot": p.spot, "max_gpus": p.max_gpus,
                                      "price": p.price} for p in pools]),
            "GQA_JOB_DEFINITION": JOB_DEFINITION,
            "GQA_CHECKPOINT_BUCKET": BUCKET, "GQA_CHECKPOINT_PREFIX": CHECKPOINT_PREFIX,
            "GQA_WAKEUP_QUEUE_URL": urls.wakeup,
            "GQA_INTAKE_URLS": json.dumps({"high": urls.intake[0], "normal": urls.intake[1], "low": urls.intake[2]}),
            "GQA_ACCESS": json.dumps(ACCESS), "GQA_TRIGGER_BUCKETS": json.dumps(["data"])}))
        from lambdas import admit, api, dispatch, reconcile
        caches = (api.container, admit.container, dispatch.container, reconcile.container)
        for cache in caches:
            cache.cache_clear()      # fresh "containers": their clients are built inside the mock
        try:
            yield Deployment(api, admit, dispatch, reconcile, urls, clock, session)
        finally:
            for cache in caches:
                cache.cache_clear()


# -- Batch's side ------------------------------------------------------------------------------------

@dataclass
class Submitted:
    """One SubmitJob call as the dispatcher made it, and the job id Batch gave back."""

    batch_job_id: str
    request: dict[str, Any]
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def job_id(self) -> str:
        return self.environment["GQA_JOB_ID"]

    @property
    def attempt(self) -> int:
        return int(self.environment["GQA_ATTEMPT"])

    @property
    def spot(self) -> bool:
        return self.request["jobQueue"] in {p.queue_name for p in POOLS if p.spot}


class FakeBatch:
    """Watches a Batch client's SubmitJob calls (the parameters as the caller
    built them, paired with the answer through botocore's per-request context)
    and makes the state-change events Batch would emit for them."""

    def __init__(self, client: Any):
        self.submitted: list[Submitted] = []
        self._taken = 0
        events = client.meta.events
        events.register("before-parameter-build.batch.SubmitJob", self._asked)
        events.register("after-call.batch.SubmitJob", self._answered)

    @staticmethod
    def _asked(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["gqa_request"] = copy.deepcopy(params)

    def _answered(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        request = context.get("gqa_request")
        if request is None or "jobId" not in parsed:
            return   # a refused call created no Batch job
        env = {e["name"]: e["value"] for e in request.get("containerOverrides", {}).get("environment", [])}
        self.submitted.append(Submitted(parsed["jobId"], request, env))

    def take_new(self) -> list[Submitted]:
        """The submissions made since the last call."""
        new = self.submitted[self._taken:]
        self._taken = len(self.submitted)
        return new

    @staticmethod
    def event(job: Submitted, status: str, *, at: float, started: float | None = None,
              reason: str | None = None, exit_code: int | None = None) -> dict[str, Any]:
        """A "Batch Job State Change" as EventBridge delivers it: the detail has
        DescribeJobs' shape; times are epoch milliseconds, as Batch writes them."""
        request = job.request
        arn = f"arn:aws:batch:{REGION}:{ACCOUNT}:job/{job.batch_job_id}"
        overrides = request.get("containerOverrides", {})
        container: dict[str, Any] = {
            "image": "public.ecr.aws/gqa/train:1", "command": overrides.get("command", []),
            "environment": overrides.get("environment", []),
            "resourceRequirements": overrides.get("resourceRequirements", []),
            "volumes": [], "mountPoints": [], "ulimits": [], "networkInterfaces": [], "secrets": []}
        detail: dict[str, Any] = {
            "jobArn": arn, "jobName": request["jobName"], "jobId": job.batch_job_id,
            "jobQueue": f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{request['jobQueue']}",
            "status": status, "attempts": [], "createdAt": int(at * 1000) - 5000,
            "retryStrategy": request.get("retryStrategy", {"attempts": 1}), "dependsOn": [],
            "jobDefinition": f"arn:aws:batch:{REGION}:{ACCOUNT}:job-definition/{JOB_DEFINITION}:1",
            "parameters": {}, "container": container, "tags": dict(request.get("tags", {})),
            "propagateTags": True, "platformCapabilities": ["EC2"], "eksAttempts": []}
        if started is not None:
            detail["startedAt"] = int(started * 1000)
            container["logStreamName"] = f"{JOB_DEFINITION}/default/{job.batch_job_id}"
            container["taskArn"] = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/gqa/{job.batch_job_id}"
        if status in ("SUCCEEDED", "FAILED"):
            detail["stoppedAt"] = int(at * 1000)
            detail["statusReason"] = reason or "Essential container in task exited"
            ended = {"exitCode": exit_code} if exit_code is not None else {}   # a reclaim leaves none
            container.update(ended)
            entry: dict[str, Any] = {"container": {"taskArn": container.get("taskArn"), **ended},
                                     "stoppedAt": int(at * 1000), "statusReason": detail["statusReason"]}
            if started is not None:
                entry["startedAt"] = int(started * 1000)
            detail["attempts"] = [entry]
        return {"version": "0", "id": f"{job.batch_job_id}-{status}", "detail-type": "Batch Job State Change",
                "source": "aws.batch", "account": ACCOUNT, "time": "2024-01-01T00:00:00Z", "region": REGION,
                "resources": [arn], "detail": detail}
