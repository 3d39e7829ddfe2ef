"""The dispatch function: one control-loop pass (gqa.services.supervisor holds
every rule): promote retries that are due, stop attempts past their wall time,
carry out cancel and requeue requests, then schedule and submit to Batch.

Input: a message batch from the wake-up queue, or a scheduled EventBridge
event. Either only says "run a pass now"; the body is not read, and one pass
serves every wake-up in the batch.

Environment (read by lambdas/environment.py):
GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE (the
DynamoDB tables), GQA_POOLS (a JSON list of resources.Pool's fields),
GQA_JOB_DEFINITION (the Batch job definition), GQA_CHECKPOINT_BUCKET and
optionally GQA_CHECKPOINT_PREFIX (checkpoints on S3), and optionally
GQA_IMAGES (a JSON object: spec image -> job definition). A missing or
invalid one fails the cold start loudly.

Reads: a pass reads the live jobs, the ledger and the settings once each
(DynamoDBStore.pass_reads); an idle pass, with nothing queued, is one Query.
A scheduled pass adds one DescribeJobs when attempts have been quiet for
overdue.QUIET (a hundred of them a call, at most one call a pass), plus a
read and a write per attempt whose end it finds unrecorded.
The container keeps the settings for SETTINGS_TTL seconds (a quota or policy
change applies within that) and the run-time samples behind the estimates
for SAMPLES_TTL.

Concurrency: the stack gives the function a reserved concurrency of 1, but a
pass is safe without it: every claim of a job (QUEUED -> STARTING) is a write
guarded on the job's state, so a second pass over the same jobs gets Conflict
and submits nothing; the services treat that as "the next pass will see it".

Errors are raised (BackendUnavailable from DynamoDB or Batch): a wake-up
message is then delivered again, and a scheduled invocation is retried by
Lambda; the next tick runs a fresh pass anyway."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger

from gqa.adapters.aws.batch_compute import BatchCompute
from gqa.adapters.aws.dynamodb_store import SAMPLES_TTL, SETTINGS_TTL, DynamoDBStore
from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.adapters.clock import SystemClock, SystemRandom
from gqa.services.overdue import OverdueCheck
from gqa.services.reconcile import ReconcileService
from gqa.services.supervisor import Supervisor
from lambdas import environment

logger = Logger(service="gqa-dispatch")


@dataclass(frozen=True)
class Dispatcher:
    store: DynamoDBStore
    compute: BatchCompute
    supervisor: Supervisor
    overdue: OverdueCheck

    def run_pass(self, *, repair: bool = False) -> list[str]:
        """One pass, in the local daemon's order: retries first, so a promoted
        job competes in this pass's scheduling. Returns the started job ids.
        `repair` (the scheduled passes) first asks Batch about launches a dead
        pass never recorded, and about attempts whose end was never heard of
        (services/overdue.py): calls that wake-ups need not make."""
        with self.store.pass_reads():   # each table read once for the whole pass
            if repair:
                self.supervisor.repair_launches()
                self.overdue.run()
            self.supervisor.promote_retries()
            self.supervisor.enforce_wall_time()
            self.supervisor.carry_out_requests()
            return [job.id for job in self.supervisor.dispatch()]


def build() -> Dispatcher:
    names = environment.table_names()
    clock = SystemClock()
    store = DynamoDBStore(boto3.client("dynamodb"), names, settings_ttl=SETTINGS_TTL, samples_ttl=SAMPLES_TTL)
    checkpoints = S3Checkpoints(boto3.client("s3"), environment.checkpoint_bucket(), environment.checkpoint_prefix())
    compute = BatchCompute(boto3.client("batch"), environment.pools(), environment.job_definition(), checkpoints,
                           clock, images=environment.images())
    # the pools are this deployment's GPUs: the store must know them (and their
    # prices) before admission can check limits or the scheduler place anything;
    # once per cold start keeps them in step with the function's configuration
    store.set_inventory(compute.inventory())
    rng = SystemRandom()
    # answers about attempts whose events were lost settle through the reconcile service, without a
    # wake-up: this very pass schedules the GPUs they free
    overdue = OverdueCheck(store, compute, ReconcileService(store, rng), clock)
    return Dispatcher(store, compute, Supervisor(store, compute, clock, rng, launches=compute), overdue)


@cache
def dispatcher() -> Dispatcher:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # an SQS batch carries Records; a schedule is one EventBridge event: both mean "a pass now"
    trigger = "wakeup" if "Records" in event else str(event.get("detail-type", "schedule"))
    started = dispatcher().run_pass(repair=trigger != "wakeup")
    logger.info("dispatch pass", extra={"trigger": trigger, "started": started})
    return {"started": started}
