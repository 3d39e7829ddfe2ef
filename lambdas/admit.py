"""The admit function: a submission on an intake queue becomes queued jobs
(gqa.services.submit holds every rule: hard limits, arrays, approvals).

Input: an SQS event from the tier intake queues. Records are handled one by
one with Powertools' BatchProcessor, and the function answers with a partial
batch response, so only the records that failed are delivered again (the
event source mapping must enable ReportBatchItemFailures). On a FIFO queue
the FIFO processor is used: it stops at the first failure, keeping a user's
submissions in the order sent (skip_group_on_error: only the failed record's
group, one owner, stops; other owners' records go on).

Environment: GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE (a missing
one fails the cold start loudly), and optionally GQA_WAKEUP_QUEUE_URL: the
dispatcher's wake-up queue, told once per batch that admitted jobs, so they
are scheduled at once rather than at the next tick.

Redelivery: SQS delivers at least once, so a submission is admitted at most
once per idempotency key with Powertools' idempotency utility, its records
kept in the settings table (partition "admission", sort the hashed key).
Before creating, a conditional put claims the key (a second delivery in
flight fails and is retried later); after creating, the created job ids are
stored, and a later delivery returns them without creating anything. An
exception while admitting deletes the claim, so the retry admits afresh.
Powertools was chosen over a hand-made claim because it also expires a claim
whose holder died (after the function's remaining time), which a plain
conditional put would keep forever. The one gap left: a container killed
between creating the jobs and storing their ids leaves a claim that expires,
and a redelivery after that creates the jobs again.

Errors: a malformed message, an invalid spec (SpecError) and a spec over a
hard limit (Rejected) are consumed and logged with the reason: no retry can
mend them. BackendUnavailable (DynamoDB throttling past the adapter's
retries, no inventory registered yet) and a submission still being admitted
elsewhere fail the record, so SQS delivers it again (and, after the queue's
max_receive_count, moves it to the dead-letter queue)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, SqsFifoPartialProcessor
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (DynamoDBPersistenceLayer, IdempotencyConfig,
                                                         idempotent_function)

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.retrying_client import RetryingClient
from gqa.adapters.aws.sqs_intake import SqsIntake, submission_from_record
from gqa.adapters.aws.tables import PK, SK, TableNames
from gqa.adapters.clock import SystemClock
from gqa.models.errors import Rejected, SpecError
from gqa.ports import Submission
from gqa.services.submit import SubmitService

logger = Logger(service="gqa-admit")
IDEMPOTENCY_PARTITION = "admission"
# How long a key is remembered: longer than any message can live on an intake
# queue or its dead-letter queue (14 days), so a redrive is deduplicated too.
REMEMBER_KEYS_FOR = 15 * 24 * 3600


@dataclass(frozen=True)
class Admission:
    """What one container wires once: the store, the service, and the submit
    call wrapped in the idempotency guard."""

    store: DynamoDBStore
    service: SubmitService
    config: IdempotencyConfig
    admit_once: Callable[..., list[str]]
    intake: SqsIntake | None


def build() -> Admission:
    names = TableNames(jobs=os.environ["GQA_JOBS_TABLE"], settings=os.environ["GQA_SETTINGS_TABLE"],
                       ledger=os.environ["GQA_LEDGER_TABLE"])
    dynamodb = boto3.client("dynamodb")
    store = DynamoDBStore(dynamodb, names)
    # no waker here: one wake-up per batch (below), not one per submission
    service = SubmitService(store, SystemClock())
    config = IdempotencyConfig(event_key_jmespath="idempotency_key", expires_after_seconds=REMEMBER_KEYS_FOR)
    persistence = DynamoDBPersistenceLayer(table_name=names.settings, key_attr=PK, sort_key_attr=SK,
                                           static_pk_value=IDEMPOTENCY_PARTITION, boto3_client=RetryingClient(dynamodb))

    def admit(submission: dict[str, Any]) -> list[str]:
        return [job.id for job in service.admit(Submission(**submission))]

    admit_once = idempotent_function(admit, data_keyword_argument="submission", persistence_store=persistence,
                                     config=config)
    wakeup = os.environ.get("GQA_WAKEUP_QUEUE_URL")
    intake = SqsIntake(boto3.client("sqs"), {}, wakeup) if wakeup else None
    return Admission(store, service, config, admit_once, intake)


@cache
def admission() -> Admission:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


def record_handler(record: SQSRecord) -> list[str]:
    """One record -> the ids of the jobs it admitted ([] when consumed without jobs)."""
    logger.remove_keys(["idempotency_key", "owner"])   # the previous record's
    try:
        submission = submission_from_record(record.raw_event)
    except SpecError as exc:
        logger.error("consumed a malformed message", extra={"message_id": record.message_id, "reason": str(exc)})
        return []
    logger.append_keys(idempotency_key=submission.idempotency_key, owner=submission.owner)
    try:
        ids = admission().admit_once(submission=asdict(submission))
    except (SpecError, Rejected) as exc:
        # consumed: the same spec would be refused again on every delivery
        logger.warning("consumed a submission that cannot be admitted",
                       extra={"message_id": record.message_id, "reason": str(exc), "error": type(exc).__name__})
        return []
    logger.info("admitted", extra={"message_id": record.message_id, "job_ids": ids})
    return ids


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    wiring = admission()
    wiring.config.register_lambda_context(context)   # an in-progress claim expires with this invocation
    records = event.get("Records", [])
    fifo = any(str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records)
    # every record reported on its own, even when all failed: SQS redelivers exactly those
    processor = (SqsFifoPartialProcessor(skip_group_on_error=True) if fifo
                 else BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False))
    with processor(records=records, handler=record_handler, lambda_context=context):
        outcomes = processor.process()
    admitted = [job_id for status, result, _ in outcomes if status == "success" and result for job_id in result]
    if admitted and wiring.intake is not None:
        try:
            wiring.intake.wake_dispatcher()
        except Exception:
            # the jobs are stored: the dispatcher's schedule starts them at its next tick
            logger.exception("could not wake the dispatcher")
    return processor.response()
