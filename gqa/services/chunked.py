"""A large submission admitted in chunks (AWS): each intake message writes
one chunk of its tasks and hands the rest on as a continuation message on
the same tier's queue, so submissions queued behind it are admitted between
its chunks, and no message holds more than one function's time of writes.

Exactly once, whatever is delivered how often and wherever a delivery dies:

- a chunk's tasks are written create-if-absent under the reserved ids, so
  writing a chunk again writes nothing new;
- the group's progress (ports.AdmissionProgress) moves from the chunk's
  start to its end in one conditional write, `next == start`: of the
  deliveries of a chunk (a redelivery, a duplicated continuation) exactly
  one moves it, and only that one hands the rest on;
- a delivery that finds the progress already moved past its start stops,
  unless it is the delivery that moved it (its `mover`): it died after
  moving it and before the continuation was sent, so it sends it again. A
  continuation sent twice that way is two messages: the first to move the
  progress goes on, the other finds it moved by another and stops;
- a move whose answer was lost (applied, then a 5xx or a reset; the retry
  fails its own condition) reads as not moved: the delivery reads the
  progress again and, finding itself the mover, goes on as the one that
  moved it.

The verdict (queued, waiting for approval, rejected) is the first chunk's,
kept with the progress, so an array is never half rejected. A decision on
the group while tasks remain (cancel, approve, deny, hold, release:
services/control.py) is added to the progress, and every task written after
it carries it (HELD there is a user's hold: no budget holds a task unwritten); a
chunk written while the decision was made finds the progress's revision
changed when it moves it, and applies the decision to its own tasks first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from ..models.job import JobRecord, JobState
from ..ports import AdmissionProgress, Admissions, Change, Intake, JobRecords, Submission

log = logging.getLogger("gqa.submit")


def admit_chunk(store: JobRecords, admissions: Admissions, intake: Intake, submission: Submission, first: JobRecord,
                total: int, part: Callable[[int, int], list[JobRecord]], delivery: str, *,
                seconds: float | None = None,
                announce: Callable[[JobRecord, int], None] = lambda job, count: None) -> list[JobRecord]:
    """Write the chunk of the submission's `total` jobs that `submission.start`
    names; returns the records it stored. `first` is the first job as this
    delivery would decide it, `part(a, b)` jobs a..b-1 likewise (the first
    chunk's decision, kept with the progress, overrides both). `delivery`
    names this delivery of the message (SQS's message id: the same on a
    redelivery, another for another message). `announce(job, count)` tells
    the approvers, once, of a submission admitted to wait for them."""
    group, start = first.group, submission.start
    progress = admissions.progress(group)
    if progress is None:
        if start != 0:
            log.error("continuation of %s at task %d without its progress: consumed", group, start)
            return []
        progress = admissions.begin(AdmissionProgress(group, total, 0, "", first.history))
    if progress.next != start:
        if progress.mover == delivery and start < progress.next < total:
            intake.send(replace(submission, start=progress.next))   # ours, lost before it was sent
        return []
    end = min(total, start + admissions.chunk(first, seconds))
    written: list[JobRecord] = []
    for jobs in admissions.pace([as_decided(r, progress) for r in part(start, end)]):
        written += store.create(jobs)
    while not admissions.advance(group, start, end, progress.rev, delivery):
        now = admissions.progress(group)
        if now is not None and now.next != start and now.mover == delivery:
            # this message moved it: our write was applied and its answer lost, its retry
            # failing its own condition (or a copy of this very message moved it meanwhile)
            end = now.next
            break
        if now is None or now.next != start:
            return written    # another delivery of this chunk moved it on and hands the rest on
        written = follow(store, written, progress, now)
        progress = now
    if start == 0 and progress.state == JobState.PENDING_APPROVAL:
        # once, for the whole submission: only one delivery moves the progress from 0
        announce(as_decided(first, progress), total)
    if end < total:
        intake.send(replace(submission, start=end))
    return written


def as_decided(record: JobRecord, progress: AdmissionProgress) -> JobRecord:
    """The task as the progress says the tasks not written yet are: its state,
    reason and history, submitted when the first chunk was."""
    last = progress.history[-1]
    ended = last.at if last.state.terminal else None
    return replace(record, state=last.state, reason=last.reason, history=progress.history,
                   submitted_at=progress.history[0].at, ended_at=ended, user_hold=last.state == JobState.HELD)


def follow(store: JobRecords, written: list[JobRecord], was: AdmissionProgress,
           now: AdmissionProgress) -> list[JobRecord]:
    """The decisions made on the group since `was` applied, in order, to the
    tasks this chunk wrote that are still as it wrote them. One that moved
    meanwhile (the dispatcher started it) is the decision's own to find: it
    reads the group after recording the decision."""
    out = {j.id: j for j in written}
    state = was.state
    for decision in now.history[len(was.history):]:
        fields: dict | None = {"ended_at": decision.at} if decision.state.terminal else None
        if JobState.HELD in (state, decision.state):    # a hold or a release
            fields = {**(fields or {}), "user_hold": decision.state == JobState.HELD}
        changes = [Change(j.id, state, decision.state, decision.reason, decision.at, fields)
                   for j in out.values() if j.state == state]
        for change, ok in zip(changes, store.apply_each(changes)):
            if ok:
                out[change.job_id] = replace(out[change.job_id], state=decision.state, reason=decision.reason)
        state = decision.state
    return list(out.values())
