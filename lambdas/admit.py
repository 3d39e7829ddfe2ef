"""The admit function: a submission on an intake queue becomes queued jobs
(gqa.services.submit holds every rule: hard limits, arrays, approvals).

Input: an SQS event from the tier intake queues. Records are handled one by
one with Powertools' BatchProcessor, and the function answers with a partial
batch response, so only the records that failed are delivered again (the
event source mapping must enable ReportBatchItemFailures). On a FIFO queue
the FIFO processor is used: it stops at the first failure, keeping a user's
submissions in the order sent (skip_group_on_error: only the failed record's
group, one owner, stops; other owners' records go on).

Environment (read by lambdas/environment.py):
GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE (a missing
one fails the cold start loudly), GQA_INTAKE_URLS: the tier queues a large
array's rest is handed on to, a chunk per message (services/chunked.py;
without it every submission is written whole), and optionally GQA_WAKEUP_QUEUE_URL: the
dispatcher's wake-up queue, told once per batch that admitted jobs, so they
are scheduled at once rather than at the next tick (the wake-up names the
jobs admitted QUEUED, up to wakeups.MOST_NAMED, with their items as written,
so the pass need not read the index for them), and GQA_ALERTS_TOPIC_ARN:
the SNS topic a submission admitted to wait for approval is announced on
(one message per submission, kind "approval"; services/approvals.py). Without
it nothing is announced.

Metrics (namespace gqa, service gqa-admit, by tier; services/telemetry.py):
JobsAdmitted, JobsAwaitingApproval, JobsRejected, once per batch. A
redelivered submission is counted again (the store returns its jobs as
they are): rare, and never more than once per delivery.

Redelivery: SQS delivers at least once, so admitting must be harmless to
repeat. A large array's chunks count once through its progress item
(services/chunked.py); otherwise no record of its own is needed: every submission carries the
job ids the API reserved for it, and the store writes each job only if its id
is not taken (create-if-absent). A second delivery, even one after a crash
half-way through a large array, writes only what is missing and changes no
job that exists, however far it has got. Only the delivery that wrote a
submission's jobs announces them to the approvers.

Errors: a malformed message (no reserved ids, ids that do not fit the spec)
and an invalid spec (SpecError) are consumed and logged with the reason: no
retry can mend them. A spec over a hard limit by now is recorded REJECTED
under its ids, with the numbers, so `gqa status` says why. BackendUnavailable
(DynamoDB throttling past the adapter's retries, no inventory registered yet)
and Conflict fail the record, so SQS delivers it again (and, after the
queue's max_receive_count, moves it to the dead-letter queue). An approval
request SNS refuses is logged and not retried: the jobs are recorded, and
the budget function alerts on jobs waiting too long."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, SqsFifoPartialProcessor
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from gqa.adapters.aws.admissions import DynamoDBAdmissions
from gqa.adapters.aws import wakeups
from gqa.adapters.aws.dynamodb_store import SETTINGS_TTL, DynamoDBStore
from gqa.adapters.aws.metrics import make_metrics
from gqa.adapters.aws.sns_notifier import SnsNotifier
from gqa.adapters.aws.sqs_intake import SqsIntake, submission_from_record
from gqa.adapters.clock import SystemClock
from gqa.models.errors import SpecError
from gqa.models.job import JobState
from gqa.ports import Metrics
from gqa.services import telemetry
from gqa.services.submit import SubmitService
from lambdas import environment

logger = Logger(service="gqa-admit")


@dataclass(frozen=True)
class Admission:
    """What one container wires once: the store, the service and the metrics."""

    store: DynamoDBStore
    service: SubmitService
    intake: SqsIntake | None
    metrics: Metrics


def build() -> Admission:
    names = environment.table_names()
    keep = environment.keep_history()   # how long a finished job is kept (its TTL)
    # the limits and thresholds admission checks change rarely: a change applies within SETTINGS_TTL
    store = DynamoDBStore(boto3.client("dynamodb"), names, keep_history=keep, settings_ttl=SETTINGS_TTL)
    topic = environment.alerts_topic(needed=False)
    notifier = SnsNotifier(boto3.client("sns"), topic) if topic else None
    wakeup = environment.wakeup_url()
    # the tier queues: where a large array's rest is handed on (without them, every submission is written whole)
    tiers = environment.intake_urls() if environment.optional("GQA_INTAKE_URLS") else {}
    intake = SqsIntake(boto3.client("sqs"), tiers, wakeup or "") if (wakeup or tiers) else None
    admissions = DynamoDBAdmissions(store.client, names) if tiers else None
    # no waker here: one wake-up per batch (below), not one per submission
    service = SubmitService(store, SystemClock(), notifier=notifier, intake=intake if tiers else None,
                            admissions=admissions)
    return Admission(store, service, intake if wakeup else None,
                     make_metrics(namespace="gqa", service="gqa-admit"))


@cache
def container() -> Admission:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


def record_handler(record: SQSRecord) -> Counter[tuple[int, JobState]]:
    """One record -> the jobs it stored, counted by (tier rank, state) (none for a message consumed)."""
    logger.remove_keys(["idempotency_key", "owner", "job_ids"])   # the previous record's
    try:
        submission = submission_from_record(record.raw_event)
    except SpecError as exc:
        logger.error("consumed a malformed message", extra={"message_id": record.message_id, "reason": str(exc)})
        return Counter()
    ids = submission.job_ids
    logger.append_keys(idempotency_key=submission.idempotency_key, owner=submission.owner,
                       job_ids=f"{ids[0]}..{ids[-1]} ({len(ids)})" if len(ids) > 1 else list(ids))
    logger.set_correlation_id(submission.job_ids[0] if submission.job_ids else None)
    try:
        jobs = container().service.admit(submission, delivery=record.message_id, seconds=_seconds_left())
    except SpecError as exc:
        # consumed: the same message would be refused again on every delivery
        logger.warning("consumed a submission that cannot be admitted",
                       extra={"message_id": record.message_id, "reason": str(exc), "error": type(exc).__name__})
        return Counter()
    if len(_queued) <= wakeups.MOST_NAMED:   # past that the wake-up names none: the pass reads the index
        _queued.extend(job.id for job in jobs if job.state == JobState.QUEUED)
    states = dict(Counter(job.state.value for job in jobs))   # an array can have 100,000 jobs: counts
    if any(job.state == JobState.REJECTED for job in jobs):
        logger.warning("recorded a submission over a hard limit as rejected",
                       extra={"message_id": record.message_id, "states": states, "reason": jobs[0].reason})
    else:
        logger.info("admitted", extra={"message_id": record.message_id, "states": states})
    return telemetry.admitted(jobs)


# seconds an invocation keeps for itself after its last chunk: the progress item, the continuation,
# the metrics and the partial batch answer
RESERVE_SECONDS = 5.0
_context: Any = None
_queued: list[str] = []   # this invocation's jobs admitted QUEUED: its wake-up names them


def _seconds_left() -> float | None:
    """What this invocation has left for a chunk (a batch may hold several large arrays' messages):
    less than a chunk's usual time makes a smaller chunk, never less than one transaction's."""
    remaining = getattr(_context, "get_remaining_time_in_millis", None)
    return None if remaining is None else remaining() / 1000 - RESERVE_SECONDS


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    global _context
    _context = context
    _queued.clear()
    wiring = container()
    records = event.get("Records", [])
    fifo = any(str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records)
    # every record reported on its own, even when all failed: SQS redelivers exactly those
    processor = (SqsFifoPartialProcessor(skip_group_on_error=True) if fifo
                 else BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False))
    with processor(records=records, handler=record_handler, lambda_context=context):
        outcomes = processor.process()
    counts: Counter[tuple[int, JobState]] = sum(
        (result for status, result, _ in outcomes if status == "success" and result), Counter())
    telemetry.admission(wiring.metrics, counts)
    queued = any(state == JobState.QUEUED for _, state in counts)
    if queued and wiring.intake is not None:
        try:
            # naming the jobs, with their items as written: the pass merges them instead of reading the index
            wakeups.send(wiring.intake, _queued, wiring.store.wakeup_items(_queued))
        except Exception:
            # the jobs are stored: the dispatcher's schedule starts them at its next tick
            logger.exception("could not wake the dispatcher")
    return processor.response()
