"""What a container of the api function builds once and every invocation it
serves reuses: the AWS clients, the adapters over them, and the services.

Environment (read by lambdas/environment.py):
- GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE: the tables (triggers
  live in the settings table);
- GQA_INTAKE_URLS: JSON {"high": url, "normal": url, "low": url}, the intake queues;
- GQA_WAKEUP_QUEUE_URL: the dispatcher's, told after cancel/requeue/approve
  (and hold/release/update, and a change of a quota or the policy) so they
  are carried out at once;
- GQA_NOTICES_TOPIC_ARN (optional): job notices of the cancels it writes;
- GQA_POOLS: the pools as the dispatch function has them (a JSON list of
  resources.Pool's fields): their job queues are where a job's earlier
  attempts are looked up by name for its logs;
- GQA_LOG_GROUP (optional, default /aws/batch/job): the log group of job
  definitions that name none (awslogs-group);
- GQA_CHECKPOINT_BUCKET: where code bundles are (code/<sha256>.tar.gz): GET
  /code names it, a submission whose bundle is not there is refused, and a
  trigger keeps its copy of its bundle there while it exists;
- GQA_ACCESS: JSON, see gqa.services.access.AccessPolicy.from_json:
  {"admins": [...], "approvers": [...], "identity_roles": [...]}. Roles live
  in the function's configuration, not in a table: who administers the queue
  changes through the same reviewed deployment as the IAM policies that let
  people call it, and no request pays a read for it.
A missing or invalid setting fails the cold start loudly.

Reads: the container keeps the settings (inventory, policy, teams) for
SETTINGS_TTL seconds, as the other functions do, where they are read most:
submissions (a sweep is many) and the queue (watched). The quota and cost
routes read them afresh: a change is made to the settings as they are, not
as this container last saw them, and `gqa quota show` or `gqa cost` right
after `gqa quota set` shows it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3
from aws_lambda_powertools import Logger

from gqa.adapters.aws.admissions import DynamoDBAdmissions
from gqa.adapters.aws.batch_logs import DEFAULT_GROUP, BatchLogs
from gqa.adapters.aws.batch_payload import payload_problem
from gqa.adapters.aws.code_store import S3CodeStore
from gqa.adapters.aws.dynamodb_store import SETTINGS_TTL, DynamoDBStore
from gqa.adapters.aws.sns_notices import NoticingStore, SnsNotices
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.adapters.aws.wakeups import WakeDispatcher
from gqa.adapters.clock import SystemClock
from gqa.http import paging
from gqa.services.access import AccessPolicy
from gqa.services.control import ControlService
from gqa.services.cost import CostService
from gqa.services.history import HistoryService
from gqa.services.logs import LogService
from gqa.services.overview import OverviewService
from gqa.services.queries import QueryService
from gqa.services.quota import QuotaService
from gqa.services.submit import SubmitService
from gqa.services.triggers import TriggerService
from lambdas import environment

logger = Logger(service="gqa-api")


@dataclass(frozen=True)
class Wiring:
    store: DynamoDBStore            # keeps the settings for SETTINGS_TTL
    settings: DynamoDBStore         # the same tables, the settings read afresh: the quota and cost routes'
    intake: SqsIntake
    access: AccessPolicy
    clock: SystemClock
    trigger_store: DynamoDBTriggerStore
    logs: BatchLogs
    code: S3CodeStore

    def submitter(self) -> SubmitService:
        # Batch's 30 KiB job payload and the job's code bundle, checked before ids are reserved:
        # not a failure at dispatch, or in every attempt
        return SubmitService(self.store, self.clock, intake=self.intake, spec_check=self.spec_problem)

    def spec_problem(self, spec) -> str | None:
        return payload_problem(spec) or self.code.missing(spec)

    def waker(self) -> WakeDispatcher:
        # the change is stored before the wake-up: a failed one is logged, not answered (the schedule carries it out)
        return WakeDispatcher(self.intake, self.store,
                              on_error=lambda: logger.exception("could not wake the dispatcher"))

    def control(self) -> ControlService:
        return ControlService(self.store, self.clock, self.waker(), self.admissions())

    def queries(self) -> QueryService:
        return QueryService(self.store, self.clock, self.admissions())

    def admissions(self) -> DynamoDBAdmissions:
        """Large arrays' admission in chunks: what status reads and a cancel or approval decides."""
        return DynamoDBAdmissions(self.store.client, self.store.tables)

    def history(self) -> HistoryService:
        return HistoryService(self.store, self.clock, self.store.inventory)

    def quota(self) -> QuotaService:
        # a raised budget or cap starts the jobs it held in a pass now, not at the next minute's tick
        return QuotaService(self.settings, self.waker())

    def cost(self) -> CostService:
        return CostService(self.settings, self.clock, history=self.settings)

    def overview(self) -> OverviewService:
        return OverviewService(self.store, self.store, self.clock, self.admissions())

    def triggers(self) -> TriggerService:
        # adding, listing and removing need the store, and the bucket where a trigger keeps its code;
        # the trigger function submits the jobs
        return TriggerService(self.trigger_store, self.clock, code=self.code)

    def log_pages(self) -> LogService:
        return LogService(self.store, self.logs)


def build() -> Wiring:
    names = environment.table_names()
    keep = environment.keep_history()   # how long a finished job is kept (its TTL)
    intake = SqsIntake(boto3.client("sqs"), environment.intake_urls(), environment.wakeup_url(needed=True))
    dynamodb = boto3.client("dynamodb")
    # no more read for a page than its answer could carry (each UTF-8 byte travels at least once)
    logs = BatchLogs(boto3.client("batch"), boto3.client("logs"), environment.pools(),
                     log_group=environment.log_group(DEFAULT_GROUP), max_bytes=paging.ANSWER_BYTES)
    topic = environment.notices_topic()
    # a pending job cancelled here ends here: its END notice is published after the write (sns_notices.py)
    store = NoticingStore(dynamodb, names, keep_history=keep, settings_ttl=SETTINGS_TTL,
                          notices=SnsNotices(boto3.client("sns"), topic)) \
        if topic else DynamoDBStore(dynamodb, names, keep_history=keep, settings_ttl=SETTINGS_TTL)
    return Wiring(store, DynamoDBStore(dynamodb, names), intake,
                  environment.access(), SystemClock(),
                  DynamoDBTriggerStore(dynamodb, names), logs,
                  S3CodeStore(boto3.client("s3"), environment.checkpoint_bucket()))


@cache
def container() -> Wiring:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()
