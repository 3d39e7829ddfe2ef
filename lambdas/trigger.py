"""The trigger function: objects landing in S3 become one job per burst
(gqa.services.triggers holds the rules; gqa.models.burst the debounce).

Two inputs, one function:
- an EventBridge "Object Created" event from S3 (the bucket must send events
  to EventBridge): read with Powertools' S3EventBridgeNotificationEvent data
  class, which URL-decodes the key; counted into the open burst of every
  trigger whose bucket and prefix it matches and that may still watch there
  (GQA_TRIGGER_BUCKETS, never the checkpoint or manifest bucket): a trigger
  added before the deployment file changed is ignored, logged and counted
  (and a burst it opened before is dropped at its close, with the reason),
  so it cannot start jobs from gqa's own writes. The invocation is asynchronous:
  an error makes Lambda retry it, and a retried event is counted once.
- an SQS event from the trigger-timer queue: each record closes one burst
  and submits its job. Records are handled one by one with BatchProcessor
  and answered with a partial batch response (the event source mapping must
  enable ReportBatchItemFailures), so only failed closes come back. The
  burst's owner is judged as the api function judges a caller: their ARN,
  kept with the trigger, under GQA_ACCESS and the teams' members now; one
  who may no longer submit for the job's team has the burst dropped with the
  reason (logged as a warning and counted in TriggerBurstsNotPermitted).

Environment (read by lambdas/environment.py): GQA_JOBS_TABLE,
GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE (the job store the submission checks and
reserves ids in; triggers live in the settings table),
GQA_TRIGGER_TIMER_QUEUE_URL, GQA_INTAKE_URLS (JSON {"high": url, "normal":
url, "low": url}, as the api function has it; a missing or malformed one
fails the cold start loudly), GQA_MANIFEST_BUCKET (default
GQA_CHECKPOINT_BUCKET): where the key list of a burst too large for the job's
environment is written, and GQA_TRIGGER_BUCKETS and GQA_CHECKPOINT_BUCKET:
where triggers may watch (lambdas/environment.py's trigger_places), and
GQA_ACCESS (optional, as the api function has it): admins and the team of
users in no team, for judging a burst's owner. GQA_CHECKPOINT_BUCKET also
holds the code bundles: a burst whose job names one makes it ready under
code/ from the trigger's own copy before submitting (gqa.services.triggers).

Metrics (namespace gqa, service gqa-trigger; services/telemetry.py):
TriggerObjects (objects counted into bursts; a retried event's none),
TriggerObjectsIgnored (matches of triggers that may no longer watch where they
do; emitted only when there are some), and
per timer batch TriggerBursts (bursts that submitted their job),
TriggerBurstsDropped, and TriggerBurstsNotPermitted (those of them dropped
because their owner may no longer submit for the job's team; emitted only
when there are some).

Errors: a malformed event or timer message is logged and dropped (no retry
can mend it). BackendUnavailable and Conflict (a burst that kept changing)
are raised for an object event (Lambda retries it) and fail the timer record
(SQS delivers it again; after max_receive_count it moves to the dead-letter
queue, and the next object for that trigger closes the overdue burst)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from gqa.adapters.aws.burst_timer import SqsBurstTimer, timer_from_record
from gqa.adapters.aws.code_store import S3CodeStore
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.metrics import make_metrics
from gqa.adapters.aws.s3_manifests import S3Manifests
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.adapters.clock import SystemClock
from gqa.models.errors import BackendUnavailable, Conflict, SpecError
from gqa.models.trigger import S3Object, TriggerPlaces
from gqa.ports import Metrics
from gqa.services import telemetry
from gqa.services.submit import SubmitService
from gqa.services.triggers import TriggerService
from lambdas import environment

OBJECT_CREATED = "Object Created"
logger = Logger(service="gqa-trigger")


@dataclass(frozen=True)
class Triggers:
    """What one container wires once: the service and the metrics."""

    service: TriggerService
    metrics: Metrics


def build() -> Triggers:
    names = environment.table_names()
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    clock = SystemClock()
    intake = SqsIntake(sqs, environment.intake_urls(), environment.wakeup_url() or "")
    bucket = environment.manifest_bucket()
    jobs = DynamoDBStore(dynamodb, names)
    s3 = boto3.client("s3")
    service = TriggerService(DynamoDBTriggerStore(dynamodb, names), clock,
                             timer=SqsBurstTimer(sqs, environment.trigger_timer_url()),
                             submitter=SubmitService(jobs, clock), intake=intake,
                             manifests=S3Manifests(s3, bucket) if bucket else None,
                             access=environment.access(), members=jobs,
                             code=S3CodeStore(s3, environment.checkpoint_bucket()))
    return Triggers(service, make_metrics(namespace="gqa", service="gqa-trigger"))


@cache
def container() -> Triggers:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


@cache
def places() -> TriggerPlaces:
    """Where triggers may watch, as the deployment says now (read once per container)."""
    return environment.trigger_places()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any] | PartialItemFailureResponse:
    if "Records" in event:
        return _timers(event, context)
    return _object(event)


def _object(event: dict[str, Any]) -> dict[str, Any]:
    try:
        created = S3EventBridgeNotificationEvent(event)
        if created.detail_type != OBJECT_CREATED:
            raise SpecError(f"expected an {OBJECT_CREATED!r} event, got {created.detail_type!r}")
        detail = created.detail
        obj = S3Object(bucket=detail.bucket.name, key=detail.object.key, sequencer=detail.object.sequencer,
                       version=detail.object.get("version-id"), size=detail.object.size, etag=detail.object.etag)
    except (KeyError, TypeError, AttributeError, SpecError) as exc:
        logger.error("dropped a malformed event", extra={"error": str(exc), "event_id": event.get("id")})
        return {"action": "dropped", "reason": "malformed event"}
    logger.append_keys(bucket=obj.bucket, key=obj.key)
    try:
        counted = container().service.on_object(obj, places())
    except (BackendUnavailable, Conflict):
        logger.exception("could not count the object; the event will be retried")
        raise
    results = [{"trigger_id": c.trigger_id, "burst_id": c.burst_id,
                "step": c.kind.value if c.kind else "ignored" if c.ignored else "duplicate"} for c in counted]
    ignored = [c for c in counted if c.ignored]
    for c in ignored:   # worth a look: its owner should remove it, or the deployment file allow it again
        logger.warning("ignored a trigger that may no longer watch here",
                       extra={"trigger_id": c.trigger_id, "reason": c.ignored})
    metrics = container().metrics
    telemetry.objects_counted(metrics, sum(c.kind is not None for c in counted))
    telemetry.emit(metrics, [("TriggerObjectsIgnored", telemetry.COUNT, len(ignored))] if ignored else [])
    logger.info("counted", extra={"triggers": results})
    action = "counted" if len(ignored) < len(counted) else "ignored" if ignored else "no trigger matches"
    return {"action": action, "triggers": results}


def _timers(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    with processor(records=event["Records"], handler=_close_one, lambda_context=context):
        outcomes = processor.process()
    done = [result for status, result, _ in outcomes if status == "success"]
    metrics = container().metrics
    telemetry.bursts_closed(metrics, (result["action"] for result in done))
    refused = sum(bool(result.get("not_permitted")) for result in done)
    telemetry.emit(metrics, [("TriggerBurstsNotPermitted", telemetry.COUNT, refused)] if refused else [])
    return processor.response()


def _close_one(record: SQSRecord) -> dict[str, Any]:
    logger.remove_keys(["trigger_id", "burst_id"])   # the previous record's
    try:
        trigger_id, burst_id = timer_from_record(record.raw_event)
    except SpecError as exc:
        logger.error("consumed a malformed timer message", extra={"message_id": record.message_id,
                                                                  "reason": str(exc)})
        return {"action": "dropped"}
    logger.append_keys(trigger_id=trigger_id, burst_id=burst_id)
    closed = container().service.close(trigger_id, burst_id, places())
    if closed.jobs:
        logger.set_correlation_id(closed.jobs[0])
    # a dropped burst (its trigger removed, its job no longer valid) is worth a look: a warning
    log = logger.warning if closed.action == "dropped" else logger.info
    log("closed a burst", extra={"action": closed.action, "objects": closed.count, "job_ids": list(closed.jobs),
                                 "manifest": closed.manifest, "reason": closed.reason,
                                 "not_permitted": closed.not_permitted})
    return {"action": closed.action, "jobs": list(closed.jobs), "not_permitted": closed.not_permitted}
