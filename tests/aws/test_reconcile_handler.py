"""The reconcile Lambda handler, called directly (moto never runs handler
code) with real-shaped EventBridge "Batch Job State Change" events, on moto
DynamoDB tables built from the synthesized data stack."""

from __future__ import annotations

import copy
import io
import json
import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.batch_compute import job_name
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.job_events import event_from
from gqa.adapters.aws.tables import TableNames
from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobRecord, JobState
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu
from gqa.scheduling.budget import period_of
from gqa.services.submit import SubmitService
from tests.aws.deployed import create_tables
from tests.aws.moto_support import FakeClock, LambdaContext, emf, metric, session
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
S = JobState
NAMES = TableNames.prefixed("gqa-reconcile-")
ENV = {**FAKE_AWS, "GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings,
       "GQA_LEDGER_TABLE": NAMES.ledger, "POWERTOOLS_SERVICE_NAME": "gqa-reconcile"}
T0 = 1_700_000_000.0                      # epoch seconds; Batch speaks milliseconds
STARTED_MS, STOPPED_MS = int((T0 + 10) * 1000), int((T0 + 130) * 1000)
RECLAIM = "Host EC2 (instance i-0abc123def456) terminated."
INVENTORY = Inventory(gpus=(Gpu(0, "a10g", 0.5, spot=True), Gpu(1, "a10g", 0.5, spot=True),
                            Gpu(2, "a10g", 1.5), Gpu(3, "a10g", 1.5)))


CONTEXT = LambdaContext(function_name="gqa-reconcile")


@pytest.fixture
def lambda_module():
    with mock.patch.dict(os.environ, ENV), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        from lambdas import reconcile
        reconcile.container.cache_clear()     # a fresh "container" per test: its client is moto's
        yield reconcile
        reconcile.container.cache_clear()


@pytest.fixture
def store(lambda_module) -> DynamoDBStore:
    store = DynamoDBStore(session().client("dynamodb"), NAMES)
    store.set_inventory(INVENTORY)
    return store


def call(module, event):
    return module.handler(copy.deepcopy(event), CONTEXT)


def launched(store, gpu: int = 0, **overrides) -> JobRecord:
    """One job submitted, then claimed and launched as Batch job `batch-<id>-1` on `gpu`."""
    [job] = SubmitService(store, FakeClock(T0)).submit(spec(**overrides))
    [job] = store.apply([Change(job.id, S.QUEUED, S.STARTING, f"assigned GPUs {gpu}", T0,
                                {"assigned": (gpu,), "attempts": 1, "proc_token": f"batch-{job.id}-1"})])
    return job


def batch_event(job: JobRecord, status: str, *, attempt: int = 1, reason: str | None = None,
                exit_code: int | None = None, container_reason: str | None = None, started: bool = True,
                env: bool = True, tags: bool = False, memory_mib: int = 14336) -> dict:
    """A "Batch Job State Change" event as EventBridge delivers it (the detail is a DescribeJobs job)."""
    batch_id = f"batch-{job.id}-{attempt}"
    arn = f"arn:aws:batch:us-east-1:123456789012:job/{batch_id}"
    environment = [{"name": "GQA_JOB_ID", "value": job.id}, {"name": "GQA_ATTEMPT", "value": str(attempt)},
                   {"name": "GQA_CHECKPOINT_URI", "value": f"s3://ckpt/jobs/{job.id}/"}] if env else []
    container: dict = {
        "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest",
        "command": ["python", "train.py"], "environment": environment, "volumes": [], "mountPoints": [],
        "ulimits": [], "networkInterfaces": [],
        "resourceRequirements": [{"type": "GPU", "value": "1"}, {"type": "VCPU", "value": "4"},
                                 {"type": "MEMORY", "value": str(memory_mib)}],
        "secrets": []}
    detail: dict = {
        "jobArn": arn, "jobName": job_name(job, attempt), "jobId": batch_id,
        "jobQueue": "arn:aws:batch:us-east-1:123456789012:job-queue/gqa-a10g-spot",
        "status": status, "attempts": [], "createdAt": int(T0 * 1000), "retryStrategy": {"attempts": 1},
        "dependsOn": [], "jobDefinition": "arn:aws:batch:us-east-1:123456789012:job-definition/gqa-train:3",
        "parameters": {}, "container": container, "propagateTags": True, "platformCapabilities": ["EC2"],
        "eksAttempts": []}
    if tags:
        detail["tags"] = {"gqa:job-id": job.id, "gqa:attempt": str(attempt), "gqa:team": job.team}
    if started and status in ("RUNNING", "SUCCEEDED", "FAILED"):
        detail["startedAt"] = STARTED_MS
        container["logStreamName"] = f"gqa-train/default/{batch_id}"
        container["taskArn"] = f"arn:aws:ecs:us-east-1:123456789012:task/gqa/{batch_id}"
    if status in ("SUCCEEDED", "FAILED"):
        detail["stoppedAt"] = STOPPED_MS
        detail["statusReason"] = reason or "Essential container in task exited"
        ended = {k: v for k, v in (("exitCode", exit_code), ("reason", container_reason)) if v is not None}
        container.update(ended)
        attempt_entry = {"container": {"taskArn": container.get("taskArn"), **ended},
                         "stoppedAt": STOPPED_MS, "statusReason": detail["statusReason"]}
        if started:
            attempt_entry["startedAt"] = STARTED_MS
        detail["attempts"] = [attempt_entry]
    return {"version": "0", "id": f"{batch_id}-{status}", "detail-type": "Batch Job State Change",
            "source": "aws.batch", "account": "123456789012", "time": "2023-11-14T22:15:20Z",
            "region": "us-east-1", "resources": [arn], "detail": detail}


# -- the happy path, and what at-least-once delivery does to it -------------------------------------

def test_running_then_succeeded_settles_the_job(lambda_module, store):
    job = launched(store, team="vision")

    first = call(lambda_module, batch_event(job, "RUNNING"))
    second = call(lambda_module, batch_event(job, "SUCCEEDED", exit_code=0))

    assert (first["action"], first["state"]) == ("running", "RUNNING")
    assert (second["action"], second["state"], second["reason"]) == ("settled", "SUCCEEDED", "exit code 0")
    done = store.get(job.id)
    assert [t.state for t in done.history][-3:] == [S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert (done.started_at, done.ended_at, done.gpu_seconds) == (T0 + 10, T0 + 130, 120.0)
    assert store.spend(period_of(T0)) == {"vision": pytest.approx(0.5 * 120 / 3600)}


def test_a_start_is_one_write_and_an_end_one_read_and_one_write(lambda_module, store):
    first, second = launched(store, gpu=0, team="vision"), launched(store, gpu=1, team="vision")
    calls: list[str] = []
    lambda_module.container().service.store.client.meta.events.register(
        "before-call.dynamodb.*", lambda model, **_: calls.append(model.name))

    call(lambda_module, batch_event(first, "RUNNING"))
    # the start: one write guarded on the attempt, nothing read
    assert calls == ["UpdateItem"]
    assert call(lambda_module, batch_event(first, "RUNNING"))["action"] == "ignored"
    # a duplicate: the guarded write refused, then the job read and the event judged on it
    assert calls == ["UpdateItem", "UpdateItem", "GetItem"]
    calls.clear()
    call(lambda_module, batch_event(first, "SUCCEEDED", exit_code=0))
    # the job, then the settlement with its team's usage and spend in one transaction; the
    # settings (prices, half-life) once per container
    assert calls == ["GetItem", "Query", "TransactWriteItems"]
    calls.clear()
    call(lambda_module, batch_event(second, "SUCCEEDED", exit_code=0))
    assert calls == ["GetItem", "TransactWriteItems"]
    assert store.spend(period_of(T0)) == {"vision": pytest.approx(0.5 * 120 / 3600 * 2)}


def test_a_duplicated_event_is_applied_once(lambda_module, store):
    job = launched(store, team="vision")
    call(lambda_module, batch_event(job, "RUNNING"))
    ended = batch_event(job, "SUCCEEDED", exit_code=0)

    assert call(lambda_module, ended)["action"] == "settled"
    settled = store.get(job.id)
    assert call(lambda_module, ended)["action"] == "ignored"

    assert store.get(job.id) == settled
    assert store.spend(period_of(T0)) == {"vision": pytest.approx(0.5 * 120 / 3600)}   # charged once


@pytest.mark.parametrize("late", ["FAILED", "RUNNING"], ids=["duplicate-reclaim", "late-running"])
def test_an_event_of_the_previous_attempt_after_the_next_claim_is_ignored(lambda_module, store, late):
    """Redelivered after the job was requeued and claimed again (QUEUED -> STARTING, as the dispatcher
    writes a claim), while SubmitJob of attempt 2 is in flight: neither settled again nor started."""
    job = launched(store, team="vision", spot=True, retries={"on_error": 3})
    call(lambda_module, batch_event(job, "RUNNING"))
    reclaim = batch_event(job, "FAILED", reason=RECLAIM)
    assert call(lambda_module, reclaim)["action"] == "settled"
    store.apply([Change(job.id, S.RETRY_WAIT, S.QUEUED, "back in the queue", T0 + 200)])
    [claimed] = store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0", T0 + 201,
                                    {"assigned": (0,), "pid": None, "proc_token": None, "time_limit": None})])

    out = call(lambda_module, reclaim if late == "FAILED" else batch_event(job, "RUNNING"))

    assert (out["action"], out["state"]) == ("ignored", "STARTING")
    assert store.get(job.id) == claimed
    assert (claimed.reclaims, claimed.gpu_seconds) == (1, 120.0)
    assert store.spend(period_of(T0)) == {"vision": pytest.approx(0.5 * 120 / 3600)}   # charged once
    # the dispatcher records its launch, and attempt 2's events apply to it
    store.apply([Change(job.id, S.STARTING, None, "", T0 + 202,
                        {"attempts": 2, "pid": 0, "proc_token": f"batch-{job.id}-2"})])
    assert call(lambda_module, batch_event(job, "RUNNING", attempt=2))["action"] == "running"


def test_events_in_reverse_order(lambda_module, store):
    job = launched(store)
    events = [batch_event(job, "RUNNABLE", started=False), batch_event(job, "STARTING", started=False),
              batch_event(job, "RUNNING"), batch_event(job, "SUCCEEDED", exit_code=0)]

    actions = [call(lambda_module, e)["action"] for e in reversed(events)]

    assert actions == ["settled", "ignored", "ignored", "ignored"]
    done = store.get(job.id)
    assert done.state == S.SUCCEEDED
    assert [t.state for t in done.history][-3:] == [S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert (done.started_at, done.gpu_seconds) == (T0 + 10, 120.0)


# -- what Batch's reasons mean ----------------------------------------------------------------------

def test_a_spot_reclaim_waits_to_retry_and_counts_the_reclaim(lambda_module, store):
    job = launched(store, spot=True, retries={"on_error": 1})
    call(lambda_module, batch_event(job, "RUNNING"))

    out = call(lambda_module, batch_event(job, "FAILED", reason=RECLAIM))

    waiting = store.get(job.id)
    assert out["state"] == "RETRY_WAIT"
    assert (waiting.reclaims, waiting.interruptions, waiting.error_retries) == (1, 1, 0)
    assert RECLAIM in waiting.reason
    # the scheduler sees the reclaim once the retry is due (the item codec and the pending index carry it)
    store.apply([Change(job.id, S.RETRY_WAIT, S.QUEUED, "back in the queue", T0 + 3600)])
    [pending], _ = store.scheduling_view()
    assert (pending.id, pending.spot, pending.reclaims) == (job.id, True, 1)


@pytest.mark.parametrize("kwargs, state, reason", [
    (dict(exit_code=3), "FAILED", "exit code 3"),
    (dict(exit_code=137, container_reason="OutOfMemoryError: Container killed due to memory usage"), "FAILED",
     "ran out of memory: the container used more than its 14 GiB; ask for more with resources.memory"),
    (dict(reason="Job attempt duration exceeded timeout"), "TIMED_OUT", "exceeded its wall time of 2h00m"),
    (dict(reason="Task failed to start", started=False,
          container_reason="CannotPullContainerError: failed to resolve ref train:latest"), "RETRY_WAIT",
     "the infrastructure failed before it ran (CannotPullContainerError: failed to resolve ref train:latest)"),
], ids=["exit-code", "oom", "timeout", "image-pull"])
def test_failures_settle_by_their_kind(lambda_module, store, kwargs, state, reason):
    job = launched(store, limits={"wall_time": "2h"})

    out = call(lambda_module, batch_event(job, "FAILED", **kwargs))

    assert out["state"] == state
    assert out["reason"].startswith(reason)
    assert store.get(job.id).state == S(state)


# -- which job an event is about --------------------------------------------------------------------

@pytest.mark.parametrize("env, tags", [(True, False), (False, True), (False, False)],
                         ids=["environment", "tags", "job-name"])
def test_the_job_and_attempt_are_found_wherever_the_event_has_them(lambda_module, store, env, tags):
    job = launched(store)
    assert call(lambda_module, batch_event(job, "RUNNING", env=env, tags=tags))["action"] == "running"


def test_an_event_of_another_attempt_is_ignored(lambda_module, store):
    job = launched(store)
    before = store.get(job.id)
    out = call(lambda_module, batch_event(job, "FAILED", attempt=2, reason=RECLAIM))
    assert out["action"] == "ignored"
    assert store.get(job.id) == before


def test_a_batch_job_gqa_did_not_launch_is_ignored(lambda_module, store):
    job = launched(store)
    event = batch_event(job, "SUCCEEDED", env=False, exit_code=0)
    event["detail"]["jobName"] = "nightly-etl"

    assert call(lambda_module, event) == {"action": "ignored", "reason": "not a gqa job"}
    assert store.get(job.id).state == S.STARTING


def test_an_event_for_an_unknown_job_is_dropped_not_retried(lambda_module, store):
    job = launched(store)
    event = batch_event(job, "SUCCEEDED", exit_code=0)
    event["detail"]["container"]["environment"][0]["value"] = "999"

    assert call(lambda_module, event) == {"action": "dropped", "job_id": "999", "reason": "no such job"}


@pytest.mark.parametrize("breakage", ["no-status", "not-a-batch-event", "no-envelope"])
def test_a_malformed_event_is_dropped(lambda_module, store, breakage):
    event = batch_event(launched(store), "RUNNING")
    if breakage == "no-status":
        del event["detail"]["status"]
    elif breakage == "not-a-batch-event":
        event["detail-type"] = "Object Created"
    else:
        event = {"detail": event["detail"]}
    assert call(lambda_module, event) == {"action": "dropped", "reason": "malformed event"}


def test_an_ended_attempt_wakes_the_dispatcher(lambda_module, store):
    sqs = session().client("sqs")
    url = sqs.create_queue(QueueName="gqa-wakeup")["QueueUrl"]
    job = launched(store)

    def wakeups() -> int:
        return int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
                   ["Attributes"]["ApproximateNumberOfMessages"])

    with mock.patch.dict(os.environ, {"GQA_WAKEUP_QUEUE_URL": url}):
        lambda_module.container.cache_clear()
        call(lambda_module, batch_event(job, "RUNNING"))
        assert wakeups() == 0
        call(lambda_module, batch_event(job, "SUCCEEDED", exit_code=0))
        call(lambda_module, batch_event(job, "SUCCEEDED", exit_code=0))    # redelivered: no second wake-up
        assert wakeups() == 1
    lambda_module.container.cache_clear()


def test_an_unreachable_store_raises_so_lambda_retries(lambda_module, store):
    job = launched(store)
    with mock.patch.dict(os.environ, {"GQA_JOBS_TABLE": "gqa-no-such-table"}):
        lambda_module.container.cache_clear()
        with pytest.raises(BackendUnavailable):
            call(lambda_module, batch_event(job, "RUNNING"))
    lambda_module.container.cache_clear()
    assert call(lambda_module, batch_event(job, "RUNNING"))["action"] == "running"   # the retry succeeds


def test_logs_carry_the_job_id_as_correlation_id(lambda_module, store):
    job = launched(store)
    out = io.StringIO()
    handler = lambda_module.logger.registered_handler   # the JSON lines Lambda sends to CloudWatch Logs
    # swapped, not setStream(): that flushes the stream the handler was made with, the stdout of
    # whichever test first imported the module, which pytest may have closed since
    previous, handler.stream = handler.stream, out
    try:
        call(lambda_module, batch_event(job, "RUNNING"))
    finally:
        handler.stream = previous

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    reconciled = [line for line in lines if line.get("message") == "reconciled"]
    [line] = reconciled
    assert (line["correlation_id"], line["attempt"], line["batch_status"], line["action"]) == \
        (job.id, 1, "RUNNING", "running")


# -- reading the detail (the adapter the handler uses) ----------------------------------------------

def test_event_from_reads_times_memory_and_reasons(store):
    job = launched(store)
    event = event_from(batch_event(job, "FAILED", reason=RECLAIM, memory_mib=30720)["detail"], received=T0 + 999)
    assert (event.batch_job_id, event.job_id, event.attempt, event.status) == (f"batch-{job.id}-1", job.id, 1, "FAILED")
    assert (event.status_reason, event.exit_code, event.container_reason) == (RECLAIM, None, None)
    assert (event.time, event.started_at, event.memory) == (T0 + 130, T0 + 10, 30 * 1024 ** 3)

    queued = event_from(batch_event(job, "RUNNABLE", started=False)["detail"], received=T0 + 5)
    assert (queued.time, queued.started_at) == (T0 + 5, None)   # no Batch time of its own: when it arrived


def test_settlements_emit_outcomes_causes_and_the_team_s_charge(lambda_module, store, capsys):
    ok = launched(store, gpu=2, team="vision")                                  # on demand, $1.5 an hour
    reclaimed = launched(store, gpu=0, team="nlp", spot=True)                   # spot, $0.5 an hour
    call(lambda_module, batch_event(ok, "RUNNING"))
    capsys.readouterr()
    call(lambda_module, batch_event(ok, "SUCCEEDED", exit_code=0))
    call(lambda_module, batch_event(ok, "SUCCEEDED", exit_code=0))               # redelivered: settles nothing
    call(lambda_module, batch_event(reclaimed, "FAILED", reason=RECLAIM))
    docs = emf(capsys.readouterr().out)
    assert {d["service"] for d in docs} == {"gqa-reconcile"}
    assert metric(docs, "JobsSucceeded") == [1] and metric(docs, "SpotReclaims") == [1]
    assert metric(docs, "JobsFailed") == [] and metric(docs, "Retries", kind="reclaimed") == [1]
    hours = (STOPPED_MS - STARTED_MS) / 1000 / 3600                              # 120 s
    assert metric(docs, "GpuHours", team="vision") == [pytest.approx(hours, abs=1e-6)]
    assert metric(docs, "Cost", team="vision") == [pytest.approx(1.5 * hours, abs=1e-6)]
    assert metric(docs, "Cost", team="nlp") == [pytest.approx(0.5 * hours, abs=1e-6)]
