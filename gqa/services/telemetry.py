"""What the functions tell a platform team's dashboard: the services' results
turned into metrics through the Metrics port (CloudWatch EMF on AWS, in the
namespace the entry point chose). Pure: results in, metric values out; the
entry points call these once per invocation with what their services returned.

Each `emit` is one document with its own dimensions (a CloudWatch metric is
its name plus its dimensions), so a value by team, tier or cause is never
mixed with the totals. Counts are emitted where the event happened, zeros
included where a rate is read from them (failures against successes).

The metric names, by function (the dashboard and alarms are built on them):
    admit      JobsAdmitted, JobsAwaitingApproval, JobsRejected            (tier)
    dispatch   JobsStarted, QueueWait (one value per started job: p50/p95), PassDuration,
               PendingJobs, FreeGpus, HeldGpus, RepairedLaunches, LostEventsRecovered;
               HeldGpus, FreeGpus (pool: a10g-spot, a100-ondemand)
    reconcile  JobsSucceeded, JobsFailed, JobsTimedOut, JobsCancelled, SpotReclaims,
               CapacityFailures, OutOfMemory; Retries (kind); GpuHours, Cost (team)
               (the dispatch function emits the same for attempts whose events were lost)
    trigger    TriggerObjects, TriggerBursts, TriggerBurstsDropped
    budget     (services/budget_watch.py) TeamSpend, BudgetUsed (team), OldestPendingAge,
               PendingJobs, HeldJobs, AlertsSent
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..models.job import JobRecord, JobState
from ..models.outcome import GPU_HOURS, PREEMPT, REQUEUE, SHUTDOWN, TIMEOUT, ExitKind
from ..models.priority import Priority
from ..ports import Inventory, Metrics
from ..scheduling.snapshot import PendingJob, RunningJob
from .reconcile import Action, Reconciled

COUNT, SECONDS, NONE = "Count", "Seconds", "None"
S = JobState
WAITING = (S.QUEUED, S.HELD)   # a job waits for GPUs in these; approval and retry backoff are other waits
ENDED = {S.SUCCEEDED: "JobsSucceeded", S.FAILED: "JobsFailed", S.TIMED_OUT: "JobsTimedOut",
         S.CANCELLED: "JobsCancelled"}
TIERS = {p.rank: p.value for p in Priority}
CAUSES = {"reclaimed": "SpotReclaims", "capacity": "CapacityFailures", "oom": "OutOfMemory"}
# the `kind` of Retries: what ended the attempt, as the backend tells it or as gqa asked it to stop
RETRY_KINDS = tuple(dict.fromkeys((*(k.value for k in ExitKind), TIMEOUT, GPU_HOURS, PREEMPT, REQUEUE, SHUTDOWN,
                                   "unknown")))

Value = tuple[str, str, float]


def emit(metrics: Metrics, values: Iterable[Value], **dimensions: str) -> None:
    """One document: `values` (name, unit, value) under `dimensions`; nothing when there are none."""
    values = list(values)
    if not values:
        return
    for name, value in dimensions.items():
        metrics.add_dimension(name, value)
    for name, unit, number in values:
        metrics.add_metric(name, unit, number)
    metrics.flush_metrics()


# -- admit ------------------------------------------------------------------------------------------
def admitted(jobs: Iterable[JobRecord]) -> Counter[tuple[int, JobState]]:
    """The jobs one submission became, counted by (tier rank, state): an array can have 100,000."""
    return Counter((job.tier, job.state) for job in jobs)


def admission(metrics: Metrics, counts: Mapping[tuple[int, JobState], int]) -> None:
    """What the submissions of one batch became, by tier ("high", "normal", "low")."""
    for rank in sorted({rank for rank, _ in counts}):
        admitted, awaiting, rejected = (sum(counts.get((rank, s), 0) for s in states)
                                        for states in (WAITING, (S.PENDING_APPROVAL,), (S.REJECTED,)))
        emit(metrics, [("JobsAdmitted", COUNT, admitted), ("JobsAwaitingApproval", COUNT, awaiting),
                       ("JobsRejected", COUNT, rejected)], tier=TIERS.get(rank, str(rank)))


# -- dispatch ---------------------------------------------------------------------------------------
def queue_wait(job: JobRecord) -> float | None:
    """Seconds the job waited for GPUs before its latest start: from when it
    last became QUEUED (or HELD for its team's budget) without a break until
    it was claimed to start. None without the history to tell."""
    history = job.history
    claim = next((i for i in range(len(history) - 1, -1, -1) if history[i].state == S.STARTING), None)
    if claim is None or claim == 0 or history[claim - 1].state not in WAITING:
        return None
    first = claim - 1
    while first > 0 and history[first - 1].state in WAITING:
        first -= 1
    return max(0.0, history[claim].at - history[first].at)


@dataclass(frozen=True)
class PassReport:
    """What one dispatch pass did and left: the jobs it started, the launches
    it mended, the lost events it recovered, and the queue and GPUs after it."""

    started: list[JobRecord]
    pending: list[PendingJob]
    running: list[RunningJob]
    inventory: Inventory | None
    repaired: int = 0
    recovered: int = 0
    settlements: list[Reconciled] = field(default_factory=list)   # attempts settled from the backend's answers


def dispatch_pass(metrics: Metrics, report: PassReport, duration: float) -> None:
    held = sum(len(r.gpus) for r in report.running)
    total = len(report.inventory.gpus) if report.inventory else held
    waits = [w for w in (queue_wait(j) for j in report.started) if w is not None]
    emit(metrics, [("JobsStarted", COUNT, len(report.started)), ("PassDuration", SECONDS, round(duration, 3)),
                   ("PendingJobs", COUNT, len(report.pending)), ("HeldGpus", COUNT, held),
                   ("FreeGpus", COUNT, max(0, total - held)), ("RepairedLaunches", COUNT, report.repaired),
                   ("LostEventsRecovered", COUNT, report.recovered),
                   *(("QueueWait", SECONDS, round(w, 3)) for w in waits)])
    for pool, (held_here, free_here) in pool_gpus(report).items():
        emit(metrics, [("HeldGpus", COUNT, held_here), ("FreeGpus", COUNT, free_here)], pool=pool)
    for settled in report.settlements:    # what their lost events would have told the reconcile function
        settlement(metrics, settled)


def pool_name(gpu_type: str, spot: bool) -> str:
    """A pool's name, as the AWS backend names its Batch resources: a10g-spot, a100-ondemand."""
    return f"{gpu_type}-{'spot' if spot else 'ondemand'}"


def pool_gpus(report: PassReport) -> dict[str, tuple[int, int]]:
    """(held, free) GPUs per pool of the inventory, zeros included, so a
    dashboard draws an idle pool at 0 rather than as a gap."""
    if report.inventory is None:
        return {}
    pool_of = {g.index: pool_name(g.type, g.spot) for g in report.inventory.gpus}
    size = Counter(pool_of.values())
    held = Counter(pool_of[i] for r in report.running for i in r.gpus if i in pool_of)
    return {pool: (held[pool], max(0, size[pool] - held[pool])) for pool in sorted(size)}


# -- reconcile --------------------------------------------------------------------------------------
def settlement(metrics: Metrics, result: Reconciled) -> None:
    """An attempt that ended: how the job went on, what ended the attempt, and
    what it used (charged to its team). Nothing for an event that settled nothing."""
    if result.action != Action.SETTLED:
        return
    job = result.job
    counts: list[Value] = []
    if job.state in ENDED:
        counts.append((ENDED[job.state], COUNT, 1))
    if result.cause in CAUSES:
        counts.append((CAUSES[result.cause], COUNT, 1))
    emit(metrics, counts)
    if job.state == S.RETRY_WAIT:
        emit(metrics, [("Retries", COUNT, 1)], kind=result.cause or "unknown")
    emit(metrics, [("GpuHours", NONE, round(result.gpu_seconds / 3600, 6)), ("Cost", NONE, round(result.cost, 6))],
         team=job.team)


# -- trigger ----------------------------------------------------------------------------------------
def objects_counted(metrics: Metrics, counted: int) -> None:
    emit(metrics, [("TriggerObjects", COUNT, counted)])


def bursts_closed(metrics: Metrics, actions: Iterable[str]) -> None:
    """The timer closes of one batch: "submitted", "dropped", or nothing to do."""
    done = Counter(actions)
    if done["submitted"] or done["dropped"]:
        emit(metrics, [("TriggerBursts", COUNT, done["submitted"]),
                       ("TriggerBurstsDropped", COUNT, done["dropped"])])
