"""Launches whose answer was never recorded: the rules, pure.

A dispatch pass claims a job (QUEUED -> STARTING, a guarded write), launches
it, then records what the backend answered (the backend's id on the job,
which stays STARTING until the backend starts the attempt, services/launched.py).
A pass that dies between the claim and the record, or a launch whose answer
was lost, leaves the job STARTING with no id, and the backend may or may not
hold the attempt. Launching it again could run it twice, so the job waits
until the backend has been asked:

- when to look: the job is STARTING with no recorded launch, and was claimed
  more than `grace` ago, longer than any pass can still be launching it (a
  pass that is still running records its own answer);
- what to decide: the backend holds the attempt -> record it, as the pass
  would have: still STARTING if it has not started (its RUNNING event, or
  the overdue check, records the start), RUNNING from the backend's start if
  it has, and settled at once if it already ended, since its events may have
  come and gone while nothing was recorded (charged from its start to its
  stop, nothing if it never started); it never received it -> back to the
  queue (via RETRY_WAIT, due now), keeping the attempt number, since that
  attempt never existed.
"""

from __future__ import annotations

from dataclasses import replace

from ..models.job import ALLOWED, JobRecord, JobState, transition
from ..ports import Change, FoundLaunch, Inventory
from .launched import claimed_at, record_launch
from .settle import settle

S = JobState
# A Lambda function runs at most 15 minutes: a pass claimed longer ago than that has ended.
LAUNCH_GRACE = 900.0


def unrecorded_launch(job: JobRecord, now: float, grace: float = LAUNCH_GRACE) -> bool:
    """Should the backend be asked whether it holds this job's next attempt?"""
    if job.state != S.STARTING or job.proc_token:
        return False
    since = claimed_at(job)
    return since is None or now - since >= grace


def repair(job: JobRecord, found: FoundLaunch | None, *, now: float, draw: float,
           inventory: Inventory | None) -> list[Change]:
    """The guarded changes for a STARTING job whose attempt `job.attempts + 1`
    the backend holds (`found`) or never received (None)."""
    attempt = job.attempts + 1
    if found is None:
        return [Change(job.id, S.STARTING, S.RETRY_WAIT,
                       f"attempt {attempt} was never received by the compute backend (the pass launching it "
                       "stopped first); back in the queue", now, {"assigned": (), "not_before": now})]
    token = found.launched.token
    how = " (found on the compute backend; the pass launching it stopped before recording it)"
    launch = record_launch(job.id, attempt, found.launched, now, how=how)
    ran = found.started_at is not None or (found.ended is not None and found.ended.code is not None)
    if not ran:
        if found.ended is None:
            return [launch]   # still queued on the backend: its RUNNING event records the start
        launched = replace(job, **(launch.fields or {}))
        ended = settle(launched, found.ended, at=found.ended_at or now, started=None, draw=draw, inventory=inventory)
        if ended.to in ALLOWED[S.STARTING]:   # it ended without starting: nothing is charged
            return [launch, ended]
    started = found.started_at or found.submitted_at or now
    record = Change(job.id, S.STARTING, S.RUNNING,
                    f"attempt {attempt} started (found on the compute backend as {token}; the pass launching it "
                    "stopped before recording it)", started,
                    {"attempts": attempt, "pid": found.launched.pid, "proc_token": token, "started_at": started,
                     "exit_code": None, "signal": None})
    if found.ended is None:
        return [record]
    running = transition(job, S.RUNNING, started, record.reason, **(record.fields or {}))
    ended_at = max(found.ended_at or now, started)
    # charged from the container's start, as its events would have been
    return [record, settle(running, found.ended, at=ended_at, started=found.started_at, draw=draw,
                           inventory=inventory)]
