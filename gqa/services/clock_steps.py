"""Keeping the queue's times true when the wall clock steps.

An attempt's wall time, its GPU-hours and its charge are measured from its
recorded start on the wall clock. A clock set forward by 3 h (NTP's first
sync on a machine whose clock was off, or a person's `date -s`) would make
a job a minute in look 3 h old: stopped as past its wall time and billed
3 h; set back, a retry's 30 s backoff would wait an hour.

So the records of what is in flight follow the step: a running attempt's
start is put where the machine's boot clock, which setting the wall clock
does not move, says it was (AttemptClock). That rule is idempotent: run at
every daemon start, it also catches a step made while the daemon was down,
and a crash halfway leaves nothing to undo. A retry's backoff has no process
to read, so its end moves by the step the loop saw (StepWatch); a step while
the daemon was down leaves those as they are."""

import logging

from ..models.job import JobState
from ..models.units import format_duration
from ..ports import AttemptClock, Change, JobStore
from .settle import apply_holding

log = logging.getLogger("gqa.clock")
# a recorded start further than this from the boot clock's is a step, not the launch's own latency
# (the start is stamped just after the process is forked, milliseconds later)
STEP_TOLERANCE = 2.0


def follow_clock(store: JobStore, attempts: AttemptClock, now: float, step: float = 0.0) -> int:
    """Move running attempts' starts back onto the boot clock, and, given the
    `step` the wall clock just made (seconds, signed), retries' backoffs by it.
    Returns how many jobs it moved."""
    running = [j for j in store.list([JobState.RUNNING]) if j.started_at is not None]
    began = attempts.began(running, now) if running else {}
    changes = []
    for job in running:
        start, recorded = began.get(job.id), job.started_at
        if start is None or recorded is None or abs(start - recorded) <= STEP_TOLERANCE:
            continue
        changes.append(Change(job.id, JobState.RUNNING, None, "", now, {"started_at": start},
                              unchanged={"attempts": job.attempts, "started_at": recorded}))
    if step:
        changes += [Change(j.id, JobState.RETRY_WAIT, None, "", now, {"not_before": j.not_before + step},
                           unchanged={"not_before": j.not_before})
                    for j in store.list([JobState.RETRY_WAIT]) if j.not_before is not None]
    moved = len(apply_holding(store, changes)) if changes else 0
    if step:
        log.warning("the wall clock stepped by %s: %d running attempts and waiting retries moved with it",
                    _signed(step), moved)
    elif moved:
        log.warning("the wall clock was set since %d running attempts started: their starts moved to the boot "
                    "clock's", moved)
    return moved


def _signed(seconds: float) -> str:
    return ("-" if seconds < 0 else "+") + format_duration(abs(seconds))
