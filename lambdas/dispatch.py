"""The dispatch function: one control-loop pass (gqa.services.supervisor holds
every rule; Supervisor.tick is the turn the local daemon runs too): promote
retries that are due, carry out cancel and requeue requests (TerminateJob,
whether Batch has started the job or not), stop attempts past their wall
time, then schedule and submit to Batch. A submitted job is recorded
STARTING with its Batch job id, not RUNNING: Batch may keep it RUNNABLE for
hours, and its wall time, cost and fair share count from Batch's RUNNING
event (the reconcile function); it holds its GPUs meanwhile.

Input: a message batch from the wake-up queue, or a scheduled EventBridge
event. Either says "run a pass now", and one pass serves every wake-up in
the batch. A wake-up may name the jobs its writer changed
(gqa/adapters/aws/wakeups.py): when every one in the batch does, the pass
reads those from the table and not the index; otherwise, and on a schedule,
it reads what the index holds changed since its previous pass.

Environment (read by lambdas/environment.py):
GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE (the
DynamoDB tables), GQA_POOLS (a JSON list of resources.Pool's fields),
GQA_JOB_DEFINITION (the Batch job definition), GQA_CHECKPOINT_BUCKET and
optionally GQA_CHECKPOINT_PREFIX (checkpoints on S3; code bundles under code/), and optionally
GQA_IMAGES (a JSON object: spec image -> job definition) and
GQA_CHECKPOINT_GRACE (seconds, the grace added to Batch timeouts), and
GQA_NOTICES_TOPIC_ARN (job notices of the moves a pass writes), and
GQA_WAKEUP_QUEUE_URL (the wake-up a pass stopped by its time sends). A missing or
invalid one fails the cold start loudly.

Reads: a pass reads the live jobs, the ledger and the settings once each
(DynamoDBStore.pass_reads). The container keeps the live jobs between
passes, as the changes index projects them (tables.py, views.QueueView): a
cold start and every views.RESYNC_EVERY seconds read the index whole (one
Query a shard, tables.CHANGE_SHARDS), other passes what changed since the
previous one, or only the jobs their wake-ups name (one BatchGetItem); the
jobs a pass changes are read whole (BatchGetItem). An idle pass, with
nothing queued, is a Query a shard.
A scheduled pass adds one DescribeJobs when attempts have been quiet for
overdue.QUIET (running, or launched and still waiting for Batch to start
them; a hundred of them a call, at most one call a pass), plus a read and a
write per attempt whose start or end it finds unrecorded.
The container keeps the settings for SETTINGS_TTL seconds (a quota or policy
change applies within that) and the run-time samples behind the estimates
for SAMPLES_TTL.

Time: a pass begins no launch in the last PASS_RESERVE seconds of its
invocation (the context's remaining time) and records its launches
LAUNCH_BATCH at a time (services/pacing.py), so hundreds of SubmitJob calls
cannot run it into its timeout with none recorded. The starts it leaves stay
queued, and it sends a wake-up (where GQA_WAKEUP_QUEUE_URL is set) for the
next pass to start them. After its starts it writes at most HOLDS_PER_PASS of
the holds and releases its plan decides (a team's whole queue crossing its
budget), waking the next pass for the rest (services/holding.py).

Concurrency: the wake-up queue's event source runs at most 2 passes at once
(its maximum concurrency, not a reserved concurrency, which would throttle
the function and send wake-ups to the dead-letter queue), and a pass is safe
alongside another: every claim of a job (QUEUED -> STARTING) is a write
guarded on the job's state, so a second pass over the same jobs gets Conflict
and submits nothing; the services treat that as "the next pass will see it".

Metrics (namespace gqa, service gqa-dispatch; services/telemetry.py): each
pass emits JobsStarted, QueueWait (one value per job submitted to Batch), PassDuration,
PendingJobs, FreeGpus, HeldGpus (also per pool, dimension `pool`, e.g.
a10g-spot), RepairedLaunches and LostEventsRecovered,
and for every attempt a lost event's answer settled, what the reconcile
function would have emitted for it.

Errors are raised (BackendUnavailable from DynamoDB or Batch): a wake-up
message is then delivered again, and a scheduled invocation is retried by
Lambda; the next tick runs a fresh pass anyway."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger

from gqa.adapters.aws.batch_compute import CLIENT_CONFIG, BatchCompute
from gqa.adapters.aws.dynamodb_store import SAMPLES_TTL, SETTINGS_TTL, DynamoDBStore
from gqa.adapters.aws.metrics import make_metrics
from gqa.adapters.aws import wakeups
from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.adapters.aws.sns_notices import NoticingStore, SnsNotices
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.adapters.clock import SystemClock, SystemRandom
from gqa.ports import Metrics
from gqa.services import telemetry
from gqa.services.overdue import OverdueCheck
from gqa.services.reconcile import ReconcileService
from gqa.services.supervisor import Supervisor
from lambdas import environment

logger = Logger(service="gqa-dispatch")
KEYS_AFTER_COLD_START = 900.0
# the end of an invocation no launch begins in: the last launch's answer (retried when throttled),
# its batch's record and the metrics (a quarter of DISPATCH_TIMEOUT)
PASS_RESERVE = 15.0
LAUNCH_BATCH = 20   # starts claimed, submitted and recorded together: a timeout loses one batch's records
# holds and releases one pass writes, after its starts (services/holding.py): one transaction, about
# 400 write units on each index partition they share (4 a job), under half a second of the 1,000 one
# partition takes (admission paces itself to half of it: adapters/aws/admissions.py); the rest, the next pass
HOLDS_PER_PASS = 100


@dataclass(frozen=True)
class Dispatcher:
    store: DynamoDBStore
    compute: BatchCompute
    supervisor: Supervisor
    overdue: OverdueCheck
    metrics: Metrics

    def run_pass(self, *, repair: bool = False) -> list[str]:
        """One pass (see pass_report); the started job ids."""
        return [job.id for job in self.pass_report(repair=repair).started]

    def pass_report(self, *, repair: bool = False, changed: wakeups.Named | None = None,
                    until: float | None = None) -> telemetry.PassReport:
        """One pass: the control loop's tick, the same the local daemon runs
        (retries first, so a promoted job competes in this pass's scheduling). `repair` (the scheduled passes)
        first asks Batch about launches a dead pass never recorded, and about
        attempts whose end was never heard of (services/overdue.py): calls
        that wake-ups need not make. The report's queue and GPUs come from the
        pass's own read and the function's pools: no call of their own.
        `changed`: the jobs the wake-ups name (None: unknown, read the index).
        `until`: when, on the supervisor's clock, the pass stops beginning launches."""
        repaired, checked = 0, None
        with self.store.pass_reads(changed):   # each table read once for the whole pass
            if repair:
                repaired = sum(self.supervisor.repair_launches().values())
                checked = self.overdue.run()
            started = self.supervisor.tick(until)
            pending, running = self.store.scheduling_view()
        return telemetry.PassReport(started, pending, running, self.compute.inventory(), repaired,
                                    checked.recovered if checked else 0,
                                    checked.settlements if checked else [])


def build() -> Dispatcher:
    names = environment.table_names()
    keep = environment.keep_history()   # how long a finished job is kept (its TTL)
    clock = SystemClock()
    topic = environment.notices_topic()
    # timeouts, requeues and cancels are told to the notices topic after they are written (sns_notices.py)
    store = NoticingStore(boto3.client("dynamodb"), names, keep_history=keep, settings_ttl=SETTINGS_TTL,
                          samples_ttl=SAMPLES_TTL, notices=SnsNotices(boto3.client("sns"), topic)) if topic else \
        DynamoDBStore(boto3.client("dynamodb"), names, keep_history=keep, settings_ttl=SETTINGS_TTL,
                      samples_ttl=SAMPLES_TTL)
    checkpoints = S3Checkpoints(boto3.client("s3"), environment.checkpoint_bucket(), environment.checkpoint_prefix())
    # the grace Batch timeouts add is the instances' stop timeout (BatchCompute's own 10 s where unset);
    # the client's config keeps botocore from repeating a SubmitJob: a second Batch job of one attempt
    compute = BatchCompute(boto3.client("batch", config=CLIENT_CONFIG), environment.pools(),
                           environment.job_definition(), checkpoints, clock, images=environment.images(),
                           default_grace=environment.checkpoint_grace(10), code_bucket=environment.checkpoint_bucket())
    # the pools are this deployment's GPUs: the store must know them (and their
    # prices) before admission can check limits or the scheduler place anything;
    # once per cold start keeps them in step with the function's configuration
    store.set_inventory(compute.inventory())
    # jobs written before the changes index (tables.py): at a cold start, and at the passes' whole
    # reads for the quarter of an hour an upgrade's other functions may still write them
    store.add_change_keys(again_for=KEYS_AFTER_COLD_START)
    rng = SystemRandom()
    # answers about attempts whose events were lost settle through the reconcile service, without a
    # wake-up: this very pass schedules the GPUs they free
    overdue = OverdueCheck(store, compute, ReconcileService(store, rng), clock)
    wakeup = environment.wakeup_url()
    # a pass stopped by its time wakes the next; a failed wake-up leaves that to the next tick
    waker = wakeups.WakeDispatcher(SqsIntake(boto3.client("sqs"), {}, wakeup), on_error=_wake_failed) \
        if wakeup else None
    supervisor = Supervisor(store, compute, clock, rng, launches=compute, launch_batch=LAUNCH_BATCH,
                            holds_per_pass=HOLDS_PER_PASS, waker=waker)
    return Dispatcher(store, compute, supervisor, overdue,
                      make_metrics(namespace="gqa", service="gqa-dispatch"))


def _wake_failed() -> None:
    logger.warning("could not wake the next pass; the next tick starts what this one left")


@cache
def container() -> Dispatcher:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # an SQS batch carries Records; a schedule is one EventBridge event: both mean "a pass now"
    trigger = "wakeup" if "Records" in event else str(event.get("detail-type", "schedule"))
    wiring = container()
    began = time.monotonic()
    changed = wakeups.named(event["Records"]) if trigger == "wakeup" else None
    until = wiring.supervisor.clock.now() + context.get_remaining_time_in_millis() / 1000 - PASS_RESERVE
    report = wiring.pass_report(repair=trigger != "wakeup", changed=changed, until=until)
    telemetry.dispatch_pass(wiring.metrics, report, time.monotonic() - began)
    started = [job.id for job in report.started]
    logger.info("dispatch pass", extra={"trigger": trigger, "started": started, "pending": len(report.pending)})
    return {"started": started}
