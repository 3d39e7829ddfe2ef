"""The budget function: one budget-watch tick (gqa.services.budget_watch holds
every rule): live spend per team, alerts at the budget thresholds, on jobs
waiting too long and on idle GPUs, the queue of a team at its budget held
(and its running jobs requeued where its policy says so).

Input: a scheduled EventBridge event (e.g. every 5 minutes). It only says
"tick now"; its id becomes the correlation id of the tick's log lines.

Environment (read by lambdas/environment.py):
GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE (the
DynamoDB tables), GQA_ALERTS_TOPIC_ARN (the SNS topic alerts go to), and
optionally GQA_WAKEUP_QUEUE_URL (the dispatcher is woken when jobs are
released or asked to stop) and GQA_GPU_METRICS_NAMESPACE (where the jobs'
GPUUtilization metric lives; default gqa). A missing required one fails the
cold start loudly.

Errors: BackendUnavailable (DynamoDB, SNS or CloudWatch unreachable or
throttling past the adapters' retries) and Conflict are raised, so Lambda
retries the invocation; so is a tick that could not deliver an alert, after
finishing everything else. A retried tick repeats nothing: alerts already
sent are claimed, holds and stops are guarded writes, spend is overwritten."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent

from gqa.adapters.aws.budget_ledger import DynamoDBBudgetRecords
from gqa.adapters.aws.cloudwatch_utilization import NAMESPACE, CloudWatchGpuUtilization
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.metrics import make_metrics
from gqa.adapters.aws.sns_notifier import SnsNotifier
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.adapters.aws.wakeups import WakeDispatcher
from gqa.adapters.clock import SystemClock
from gqa.models.errors import BackendUnavailable, Conflict
from gqa.services.budget_watch import BudgetWatch
from lambdas import environment

logger = Logger(service="gqa-budget")
# holds and releases one tick writes (one transaction): the dispatcher's passes write the rest, paced
# (lambdas/dispatch.py HOLDS_PER_PASS); the whole of a large queue would outlast the function's timeout
HOLDS_PER_TICK = 100


@dataclass(frozen=True)
class Watch:
    service: BudgetWatch
    metrics: Any


def build() -> Watch:
    names = environment.table_names()
    dynamodb = boto3.client("dynamodb")
    wakeup = environment.wakeup_url()
    waker = WakeDispatcher(SqsIntake(boto3.client("sqs"), {}, wakeup)) if wakeup else None
    metrics = make_metrics(namespace="gqa", service="gqa-budget")
    utilisation = CloudWatchGpuUtilization(boto3.client("cloudwatch"),
                                           environment.gpu_metrics_namespace(NAMESPACE))
    service = BudgetWatch(DynamoDBStore(dynamodb, names), DynamoDBBudgetRecords(dynamodb, names),
                          SnsNotifier(boto3.client("sns"), environment.alerts_topic()), SystemClock(),
                          utilisation=utilisation, metrics=metrics, waker=waker, holds_per_tick=HOLDS_PER_TICK)
    return Watch(service, metrics)


@cache
def container() -> Watch:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    trigger = EventBridgeEvent(event)
    if event.get("id"):
        logger.set_correlation_id(trigger.get_id)
    try:
        tick = container().service.tick()
    except (BackendUnavailable, Conflict):
        logger.exception("budget tick failed; it will be retried")
        raise
    summary = {"period": tick.period, "held": tick.held, "released": tick.released, "stopped": tick.stopped,
               "alerts": [a.key for a in tick.sent],
               "spend": {t: round(s.spent, 2) for t, s in tick.spend.items()}}
    logger.info("budget tick", extra={"trigger": event.get("detail-type", "schedule"), **summary})
    if tick.failed:
        logger.error("alerts not delivered; the retry sends them", extra={"failed": [a.key for a in tick.failed]})
        raise BackendUnavailable(f"{len(tick.failed)} alert(s) could not be published")
    return summary
