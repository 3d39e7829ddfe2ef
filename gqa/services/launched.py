"""Attempts launched but not started: where a launch is not a start (AWS
Batch queues a submitted job RUNNABLE until it finds an instance, minutes or
hours later), the job stays STARTING with its launch recorded until the
backend says the attempt started.

A STARTING job is then one of two things, told apart by its proc_token:

- claimed, launch not recorded (no proc_token): a pass picked it and may or
  may not have launched it; nothing knows yet (services/repair.py asks the
  backend by the job's name once the pass must be over);
- launched, waiting for the backend (a proc_token, e.g. the Batch job id):
  it holds its GPUs in the scheduler's view, but consumes no wall time, is
  charged nothing and adds no fair-share usage (those count RUNNING attempts
  only, from the start the backend reports); its events, or the overdue
  check when they are lost, move it on."""

from __future__ import annotations

from ..models.job import JobRecord, JobState
from ..ports import Change, Inventory, Launched
from .telemetry import pool_name

S = JobState
WAITING = "waiting for the compute backend to start it"


def awaiting_start(job: JobRecord) -> bool:
    """Launched (its launch recorded), not started yet."""
    return job.state == S.STARTING and bool(job.proc_token)


def claimed_at(job: JobRecord) -> float | None:
    """When the job last went to STARTING (None without its history): on a
    launched job, when its launch was decided, seconds before it was made."""
    for step in reversed(job.history):
        if step.state == S.STARTING:
            return step.at
    return None


def record_launch(job_id: str, attempt: int, launched: Launched, at: float, *, how: str = "") -> Change:
    """The guarded change that records attempt `attempt`'s launch on a STARTING
    job that stays STARTING: its number and the backend's handle on it.
    `how` says, for people, how the launch came to be known."""
    return Change(job_id, S.STARTING, None, "", at,
                  {"attempts": attempt, "pid": launched.pid, "proc_token": launched.token, "exit_code": None,
                   "signal": None, "reason": f"attempt {attempt} launched as {launched.token}{how}; {WAITING}"})


def waiting_reason(job: JobRecord, inventory: Inventory | None, now: float) -> str:
    """Why a launched job has not started, with the numbers: "waiting for spot
    capacity in pool a10g-spot, 12 min (attempt 2 launched as <Batch job id>)"
    (the pool of its GPUs; the time since it was claimed and launched, in the
    same pass)."""
    pools = {pool_name(g.type, g.spot): g.spot for g in (inventory.gpus if inventory else ())
             if g.index in job.assigned}
    if len(pools) == 1:
        [(pool, spot)] = pools.items()
        what = f"waiting for {'spot' if spot else 'on-demand'} capacity in pool {pool}"
    else:
        what = "waiting for capacity"
    since = claimed_at(job)
    waited = "" if since is None else f", {minutes(now - since)}"
    return f"{what}{waited} (attempt {job.attempts} launched as {job.proc_token})"


def minutes(seconds: float) -> str:
    """A wait in whole minutes: "0 min", "12 min", "3 h 05 min"."""
    m = int(max(0.0, seconds) // 60)
    return f"{m} min" if m < 60 else f"{m // 60} h {m % 60:02d} min"
