"""Settling an ended attempt: the one place where an exit becomes the job's
next state, its GPU time and its cost. The local supervisor (which reaps
processes) and the AWS reconcile function (which reads Batch's events) both
settle through here, so a job ends the same way wherever it ran."""

from __future__ import annotations

from ..models.job import JobRecord, JobState
from ..models.outcome import Outcome, decide, gpu_hour_budget
from ..ports import Change, Exit, Inventory, JobRecords, apply_all_else_each
from ..scheduling.budget import gpus_rate


def settle(job: JobRecord, ended: Exit, *, at: float, started: float | None, draw: float,
           inventory: Inventory | None) -> Change:
    """The guarded change that ends the job's current attempt at `at`: the exit
    rules' verdict, plus the GPU-seconds and money the attempt used, charged to
    its team in the same write. `draw` in [0, 1) is the backoff jitter.

    `started` is when the attempt began to hold its GPUs, and None if it never
    did (it failed to start, or was stopped while waiting for an instance):
    GPU time and money are charged from then until `at`, and nothing without
    it. Where a launch is a start (a local process) that is the job's
    started_at; on AWS Batch, which bills from the container's start, it is
    Batch's startedAt, which the record then keeps."""
    outcome = decide(job, code=ended.code, sig=ended.signal, now=at, draw=draw, kind=ended.kind,
                     detail=ended.detail, memory=ended.memory, spot=on_spot(job, inventory), ended_at=ended.ended_at)
    ran = max(0.0, at - started) if started is not None else 0.0
    used = job.gpus * ran
    cost = hourly_rate(job, inventory) * ran / 3600
    budget = gpu_hour_budget(job)
    if outcome.to == JobState.RETRY_WAIT and budget and job.gpus and job.gpu_seconds + used >= budget * 3600:
        # back in the queue it would start only to be stopped at once (and run its grace past the budget)
        outcome = Outcome(JobState.TIMED_OUT, f"used its budget of {budget:g} GPU-hours ({outcome.reason})",
                          dict(outcome.fields, ended_at=at, not_before=None))
    fields = dict(outcome.fields, gpu_seconds=job.gpu_seconds + used, cost=job.cost + cost)
    if started is not None:
        fields["started_at"] = started
    return Change(job.id, job.state, outcome.to, outcome.reason, at, fields, usage=used, cost=cost)


def hourly_rate(job: JobRecord, inventory: Inventory | None) -> float:
    """Price per hour of the GPUs the attempt held (`budget.gpus_rate`: GPUs no longer listed too)."""
    return gpus_rate(job.assigned, {g.index: g.price for g in inventory.gpus} if inventory else {})


def on_spot(job: JobRecord, inventory: Inventory | None) -> bool:
    """Did the attempt hold spot GPUs?"""
    spot = {g.index for g in inventory.gpus if g.spot} if inventory else set()
    return any(i in spot for i in job.assigned)


def apply_holding(store: JobRecords, changes: list[Change]) -> list[JobRecord]:
    """Apply changes of different jobs in one transaction; if one of them no
    longer holds (its job moved meanwhile, e.g. it was cancelled, or the store
    refuses that job), apply the others one by one and skip the ones that do
    not hold. The jobs as written."""
    return [job for job in apply_all_else_each(store.apply, changes) if job is not None]
