"""The reconcile function: an AWS Batch job state change becomes the gqa
job's next state (gqa.services.reconcile holds every rule). A launched job
waits STARTING until its RUNNING event, which records Batch's start: from
then it uses wall time, costs money and counts in fair share; an end that
comes first settles it directly (nothing charged if it never started).

Input: an EventBridge "Batch Job State Change" event. The envelope is
validated with Powertools' EventBridgeModel; its detail is read by
gqa.adapters.aws.job_events, which finds the gqa job and attempt in the
container environment, the tags or the job name.

Environment (read by lambdas/environment.py):
GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE (the
DynamoDB table names; a missing one fails the cold start loudly), and
optionally GQA_WAKEUP_QUEUE_URL: the dispatcher's wake-up queue, told when an
attempt ends so its GPUs are scheduled at once rather than at the next tick;
optionally GQA_NOTICES_TOPIC_ARN: job notices of starts and ends (one
PublishBatch after the write, never failing it: adapters/aws/sns_notices.py).

Calls: a RUNNING event is one UpdateItem guarded on the job STARTING on that
attempt and Batch job (nothing read first; a start wakes no pass, it frees no
GPUs); an end is one read of the job and one transaction (the job with its
team's usage and spend), plus the wake-up. A RUNNING event the guard refuses
(a duplicate, a late or early one) is then read and judged as an end is: one
read more, and a write only if one is due. A duplicate or stale end is the
read alone. The settings an end needs are kept SETTINGS_KEPT seconds.

Metrics (namespace gqa, service gqa-reconcile; services/telemetry.py), for
an event that settles an attempt: JobsSucceeded, JobsFailed, JobsTimedOut or
JobsCancelled as the job ended; SpotReclaims, CapacityFailures or
OutOfMemory as the attempt did; Retries by kind (what ended the attempt)
when the job goes back to wait; GpuHours and Cost by team.

Errors: a malformed event, a Batch job gqa did not launch, and a job the
store does not know are logged and dropped, because no retry can mend them.
BackendUnavailable (DynamoDB unreachable or throttling past the adapter's
retries) and Conflict (the job kept moving) are raised, so the asynchronous
invocation is retried by Lambda and, after that, lands in its failure
destination. Redelivery is harmless: the service ignores an event for an
attempt already settled."""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.parser import ValidationError, parse
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.job_events import MalformedEvent, event_from
from gqa.adapters.aws.metrics import make_metrics
from gqa.adapters.aws.sns_notices import NoticingStore, SnsNotices
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.adapters.aws.wakeups import WakeDispatcher
from gqa.models.errors import BackendUnavailable, Conflict, NotFound
from gqa.ports import Metrics
from gqa.services import telemetry
from gqa.services.reconcile import ReconcileService
from lambdas import environment

DETAIL_TYPE = "Batch Job State Change"
# Settlement reads two settings: the GPUs' prices, which follow the deployment's
# pools (a change is a redeploy, which starts new containers anyway), and the
# fair-share half-life, which each usage charge records with itself (ledger.py),
# so an old one is never misread. Neither can go wrong by being minutes old.
SETTINGS_KEPT = 15 * 60.0
logger = Logger(service="gqa-reconcile")


@dataclass(frozen=True)
class Reconciler:
    """What one container wires once: the service and the metrics."""

    service: ReconcileService
    metrics: Metrics


def build() -> Reconciler:
    names = environment.table_names()
    keep = environment.keep_history()   # how long a finished job is kept (its TTL)
    wakeup = environment.wakeup_url()
    topic = environment.notices_topic()
    # starts and ends are told to the notices topic after they are written (sns_notices.py)
    store = NoticingStore(boto3.client("dynamodb"), names, keep_history=keep, settings_ttl=SETTINGS_KEPT,
                          notices=SnsNotices(boto3.client("sns"), topic)) if topic else \
        DynamoDBStore(boto3.client("dynamodb"), names, keep_history=keep, settings_ttl=SETTINGS_KEPT)
    # a failed wake-up is raised: the event is retried, and its settlement found already made
    waker = WakeDispatcher(SqsIntake(boto3.client("sqs"), {}, wakeup), store) if wakeup else None
    return Reconciler(ReconcileService(store, random.Random(), waker),
                      make_metrics(namespace="gqa", service="gqa-reconcile"))


@cache
def container() -> Reconciler:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    try:
        change = parse(event=event, model=EventBridgeModel)
        if change.detail_type != DETAIL_TYPE:
            raise MalformedEvent(f"expected a {DETAIL_TYPE!r} event, got {change.detail_type!r}")
        detail = change.detail   # a plain EventBridgeModel leaves it as the JSON object it was
        if not isinstance(detail, dict):
            raise MalformedEvent(f"a Batch job state change's detail is a JSON object, not {type(detail).__name__}")
        batch_event = event_from(detail, received=change.time.timestamp())
    except (ValidationError, MalformedEvent) as exc:
        logger.error("dropped a malformed event", extra={"error": str(exc), "event_id": event.get("id")})
        return {"action": "dropped", "reason": "malformed event"}
    if batch_event is None:
        logger.info("ignored a Batch job gqa did not launch", extra={"batch_job_id": detail.get("jobId")})
        return {"action": "ignored", "reason": "not a gqa job"}

    logger.set_correlation_id(batch_event.job_id)
    logger.append_keys(job_id=batch_event.job_id, attempt=batch_event.attempt,
                       batch_job_id=batch_event.batch_job_id, batch_status=batch_event.status)
    try:
        wiring = container()
        result = wiring.service.handle(batch_event)
    except NotFound:
        logger.warning("dropped an event for a job gqa does not know")
        return {"action": "dropped", "job_id": batch_event.job_id, "reason": "no such job"}
    except (BackendUnavailable, Conflict):
        logger.exception("could not apply the event; it will be retried")
        raise
    telemetry.settlement(wiring.metrics, result)
    logger.info("reconciled", extra={"action": result.action.value, "state": result.job.state.value,
                                     "reason": result.reason})
    return {"action": result.action.value, "job_id": result.job.id, "state": result.job.state.value,
            "reason": result.reason}
