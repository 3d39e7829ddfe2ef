"""Reconcile: what Batch says happened to an attempt becomes the job's state.

The dispatcher records a launch on the job and leaves it STARTING (a
submitted Batch job may wait RUNNABLE for an instance for hours;
services/launched.py). A RUNNING event records that the attempt runs
(STARTING -> RUNNING, from Batch's startedAt, when its container started):
only from then does it use wall time, cost money and count in fair share. A
SUCCEEDED or FAILED one settles the attempt through the same exit rules,
usage and cost as the local supervisor (settle.py), after classifying
Batch's reasons (models/batch_events.py). Batch bills from the container's
start, so an attempt is charged from Batch's startedAt to its stoppedAt, and
nothing if it never started (an image that could not be pulled, a reclaim
while it waited for an instance, the queue's capacity wait running out),
however long it sat in Batch's queue; such an attempt is settled straight
from STARTING.

EventBridge delivers at least once and in no guaranteed order, so an event
changes nothing unless it is about the job's current attempt while that
attempt is still open: a duplicate finds the attempt already settled, a
late RUNNING finds it already ended, and an event of an earlier attempt (or
another Batch job than the one recorded) is ignored. An event of the attempt
the dispatcher is launching, before it recorded the launch, records it; while
a claimed job's launch is not recorded, any other event is stale: the
attempt the job was on ended before it went back to the queue, and its
redelivered or late events (EventBridge and Lambda retry for minutes, a
launch may stay unrecorded for LAUNCH_GRACE) must neither settle it again
nor start it. A SUCCEEDED or FAILED
that arrives before its RUNNING still settles: the RUNNING step is written
first, in the same transaction, so the history stays true.

A RUNNING event is one per attempt, and nearly always the expected one: it
is first tried as one write guarded on exactly that (JobStore.record_start:
the job STARTING on the event's attempt and Batch job), which reads nothing.
Only when that write does not apply is the job read and the event judged by
the rules above. A start frees no GPUs, so it wakes no scheduling pass."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from enum import StrEnum

from ..models.batch_events import RUNNING, BatchJobEvent, classify
from ..models.errors import BackendUnavailable, Conflict
from ..models.job import ALLOWED, JobRecord, JobState, transition
from ..models.outcome import ExitKind
from ..ports import Change, Exit, JobsAndSettings, Random, Waker
from .settle import settle

log = logging.getLogger("gqa.reconcile")
S = JobState
OPEN = (S.STARTING, S.RUNNING)
RACES = 3   # re-reads when the job moved between our read and our write (a cancel, the dispatcher)
# How far Batch's start of a container may be from the start a RUNNING record holds
# before a RUNNING event rewrites it. Only records written RUNNING at the launch (by a
# dispatcher from before launches stayed STARTING) can differ: within this the event
# costs a read and no write.
START_SLACK = 60.0


class Action(StrEnum):
    RUNNING = "running"      # the attempt was recorded as running
    SETTLED = "settled"      # the attempt ended: the job moved on
    IGNORED = "ignored"      # nothing to do: a duplicate, a late or a foreign event


@dataclass(frozen=True)
class Reconciled:
    """What an event did. A settlement also says what ended the attempt
    (`cause`: what gqa asked for, such as "preempt" or "cancel", else the
    backend's ExitKind value) and what it used: GPU-seconds and money."""

    action: Action
    job: JobRecord
    reason: str
    cause: str | None = None
    gpu_seconds: float = 0.0
    cost: float = 0.0


class ReconcileService:
    """`waker`, when given, is told whenever an attempt ends: its GPUs are free
    for the next scheduling pass, which need not wait for the next tick."""

    def __init__(self, store: JobsAndSettings, rng: Random, waker: Waker | None = None):
        self.store, self.rng, self.waker = store, rng, waker

    def handle(self, event: BatchJobEvent) -> Reconciled:
        """Apply one event. Raises NotFound for an unknown job, BackendUnavailable
        when the store cannot be reached, Conflict if the job kept moving."""
        if event.status == RUNNING:
            started = self._start(event)
            if started is not None:
                return started
        for _ in range(RACES):
            job, adopt, stale = judge(self.store.get(event.job_id), event)
            if stale:
                return Reconciled(Action.IGNORED, job, stale)
            cause = None
            if event.status == RUNNING:
                if job.state == S.RUNNING:
                    moved = late_start(job, event)
                    if moved is None:
                        return Reconciled(Action.IGNORED, job, "already recorded as running")
                    changes, action = [moved], Action.RUNNING
                else:
                    changes, action = [_mark_running(event)], Action.RUNNING
            elif event.ended:
                kind, changes = self._settlement(job, event)
                action, cause = Action.SETTLED, stop_cause(job, kind)
            else:   # SUBMITTED, PENDING, RUNNABLE, STARTING: Batch's queueing, nothing of ours changes
                return Reconciled(Action.IGNORED, job, f"Batch status {event.status} needs nothing")
            if adopt is not None:
                changes = [adopt, *changes]
            try:
                updated = self.store.apply(changes)
            except Conflict:
                continue
            if action == Action.SETTLED:
                self._wake(job.id)
            return Reconciled(action, updated[-1], changes[-1].reason, cause, sum(c.usage for c in changes),
                              sum(c.cost for c in changes))
        raise Conflict(f"job {event.job_id} kept changing while its Batch event was applied")

    def _start(self, event: BatchJobEvent) -> Reconciled | None:
        """The common RUNNING event, that of the attempt the job is STARTING on:
        one guarded write, no read. None when it does not apply as it stands (a
        duplicate, a late or foreign event, a launch not recorded yet, a store
        that must read first): handle() then reads the job and decides."""
        change = _mark_running(event)
        job = self.store.record_start(event.job_id, event.attempt, event.batch_job_id, change.at, change.reason)
        return None if job is None else Reconciled(Action.RUNNING, job, change.reason)

    def forgotten(self, job_id: str, batch_job_id: str, attempt: int, at: float) -> Reconciled:
        """The backend no longer knows attempt `attempt` of the job (Batch job
        `batch_job_id`): lost infrastructure, like a reclaim. The job goes back
        to the queue to resume from its checkpoint, not counted as an error.
        When it ran is unknown, so nothing is charged. Changes nothing if the
        job has moved on from that attempt. Raises as handle() does."""
        for _ in range(RACES):
            job = self.store.get(job_id)
            if job.state not in OPEN or job.attempts != attempt or job.proc_token != batch_job_id:
                return Reconciled(Action.IGNORED, job, f"attempt {attempt} ({batch_job_id}) is no longer open")
            ended = Exit(job.id, attempt, None, None, ExitKind.LOST,
                         f"Batch no longer knows Batch job {batch_job_id}; its run time is unknown and not charged")
            change = settle(job, ended, at=at, started=None, draw=self.rng.random(),
                            inventory=self.store.inventory())
            try:
                [updated] = self.store.apply([change])
            except Conflict:
                continue
            self._wake(job.id)
            return Reconciled(Action.SETTLED, updated, change.reason, stop_cause(job, ExitKind.LOST))
        raise Conflict(f"job {job_id} kept changing while its lost attempt was settled")

    def _settlement(self, job: JobRecord, event: BatchJobEvent) -> tuple[ExitKind, list[Change]]:
        kind, detail = classify(event.status, event.status_reason, event.exit_code, event.container_reason)
        ended = Exit(job.id, event.attempt, event.code, None, kind, detail, event.memory)
        draw, inventory = self.rng.random(), self.store.inventory()
        change = settle(job, ended, at=event.time, started=container_start(job, event), draw=draw,
                        inventory=inventory)
        if job.state != S.STARTING or (not event.ran and change.to in ALLOWED[S.STARTING]):
            return kind, [change]
        # it ran, but its RUNNING event is late or lost (or it ended as only a started
        # attempt can): record the start first, so its GPU time is charged and the
        # history says what happened
        running = _mark_running(event)
        started = transition(job, S.RUNNING, running.at, running.reason, **(running.fields or {}))
        return kind, [running, settle(started, ended, at=max(event.time, running.at), started=running.at,
                                      draw=draw, inventory=inventory)]


    def _wake(self, job_id: str) -> None:
        if self.waker is None:
            return
        try:
            self.waker.wake([job_id])   # named: the pass reads it from the table, whatever the index's lag
        except BackendUnavailable as exc:
            # the settlement is written: raising would only get the event redelivered and
            # ignored as a duplicate; the dispatcher's schedule picks the free GPUs up anyway
            log.warning("could not wake the dispatcher: %s", exc)


def stop_cause(job: JobRecord, kind: ExitKind) -> str:
    """What ended the job's open attempt: gqa's own stop (a user's cancel or
    requeue, a preemption, a limit) wins over how the backend carried it out."""
    if job.kill_reason:
        return job.kill_reason
    if job.request is not None:
        return job.request.value
    return kind.value


def judge(job: JobRecord, event: BatchJobEvent) -> tuple[JobRecord, Change | None, str]:
    """The event against the job as read: the job as the event finds it, the
    change that records its launch from the event where the event adopts it
    (None else), and why the event no longer concerns the job ("" if it does)."""
    adopt = _adoption(job, event)
    if adopt is not None:
        job = replace(job, **(adopt.fields or {}))
    return job, adopt, _stale(job, event)


def _adoption(job: JobRecord, event: BatchJobEvent) -> Change | None:
    """An event of the attempt being launched, before the dispatcher recorded the
    launch (it is slow, or died after Batch took the job): record the launch
    from the event, as the dispatcher would have, so the event is not lost."""
    if job.state != S.STARTING or job.proc_token or event.attempt != job.attempts + 1:
        return None
    return Change(job.id, S.STARTING, None, "", event.time,
                  {"attempts": event.attempt, "pid": 0, "proc_token": event.batch_job_id})


def _stale(job: JobRecord, event: BatchJobEvent) -> str:
    """Why the event no longer concerns the job ("" if it does)."""
    if job.state.terminal:
        return f"job already ended ({job.state})"
    if job.state == S.STARTING and not job.proc_token:
        # claimed, launch not recorded (an event of the attempt being launched was adopted): the
        # attempt the record still counts ended before the claim
        return (f"event of attempt {event.attempt}; the job was claimed for attempt {job.attempts + 1}, "
                "whose launch is not recorded yet")
    if event.attempt != job.attempts:
        return f"event of attempt {event.attempt}; the job is on attempt {job.attempts}"
    if job.proc_token and job.proc_token != event.batch_job_id:
        return f"event of Batch job {event.batch_job_id}; attempt {job.attempts} is Batch job {job.proc_token}"
    if job.state not in OPEN:
        return f"attempt {event.attempt} already settled (job is {job.state})"
    return ""


def container_start(job: JobRecord, event: BatchJobEvent) -> float | None:
    """When the attempt's container started, which is when Batch starts billing
    its instance: the event's startedAt. None if it never ran (it failed to
    start, or ended while waiting for an instance): then nothing is charged.
    An attempt Batch says ran without saying when counts from its recorded start."""
    if event.started_at is not None:
        return event.started_at
    return job.started_at if event.ran else None


def late_start(job: JobRecord, event: BatchJobEvent) -> Change | None:
    """A RUNNING record whose start is not Batch's: one a dispatcher from before
    launches stayed STARTING wrote when Batch accepted the job, though the
    container started when Batch found it an instance, seconds or hours later.
    Past START_SLACK the record takes Batch's start, so wall time, live spend and
    fair share count from it (within the slack the event costs no write)."""
    if event.started_at is None or job.started_at is None or abs(event.started_at - job.started_at) <= START_SLACK:
        return None
    return Change(job.id, S.RUNNING, None, f"attempt {event.attempt} started", event.started_at,
                  {"started_at": event.started_at})


def _mark_running(event: BatchJobEvent) -> Change:
    started = event.started_at if event.started_at is not None else event.time
    return Change(event.job_id, S.STARTING, S.RUNNING, f"attempt {event.attempt} started", started,
                  {"started_at": started, "exit_code": None, "signal": None})
