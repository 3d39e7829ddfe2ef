"""How long backfill counts on a job holding its GPUs (fit.py, index.py).

`policy.backfill_by`:

- "limits" (Slurm's EASY): a job's wall-time limit. It is a hard bound (the
  job is killed there), so a backfilled job provably delays no reservation.
  But limits asked for days hide jobs that end in minutes: a reservation
  counted from them starts days out, and the GPUs it leaves over go, again
  and again, to jobs that also ask for days, while the reserved job could
  have had them as soon as any of those ended.
- "predictions" (Tsafrir, Etsion and Feitelson, "Backfilling using
  system-generated predictions rather than user runtime estimates", IEEE
  TPDS 2007): a job's expected run time (its wall time scaled by how much of
  its limits its team's past jobs used), never past its limit. A running job
  that outlives its prediction is predicted twice as long, and again, until
  its limit. Jobs are still killed at their limits; what a prediction can
  get wrong is a reserved job's start, which a backfilled job that runs
  longer than predicted may delay.

Without an expected run time, a job counts with its limit either way."""

from .snapshot import PendingJob, Policy, RunningJob

LIMITS, PREDICTIONS = "limits", "predictions"
BACKFILL_BY = (LIMITS, PREDICTIONS)


def backfill_by_choice(text: str) -> str:
    """`text` if it names a way backfill counts run times, else ValueError saying which do."""
    if text not in BACKFILL_BY:
        raise ValueError(f"backfill counts run times by {' or '.join(BACKFILL_BY)}, not {text!r}")
    return text


def counted_run(job: PendingJob, policy: Policy) -> float | None:
    """How long backfill counts on a job it starts now holding its GPUs (None: no end)."""
    wall, expected = job.wall_time, job.expected_runtime
    if policy.backfill_by != PREDICTIONS or not expected or expected <= 0:
        return wall
    return min(expected, wall) if wall else expected


def busy_until(run: RunningJob, policy: Policy, now: float) -> float:
    """When backfill counts on a running job's GPUs coming back, as of `now`: its limit's end, or
    its start plus its expected run time, doubled for as long as that is not after `now`, and
    never past its limit's end. Piecewise constant in `now`: it moves only when a prediction is
    outlived (index.QueueIndex.advance_ends)."""
    limit_end = run.ends_by
    expected = run.expected_runtime
    if policy.backfill_by != PREDICTIONS or not run.started or not expected or expected <= 0:
        return limit_end
    return doubled_past(run.started_at, expected, now, limit_end)


def doubled_past(start: float, expected: float, now: float, limit_end: float) -> float:
    """`start + expected`, the expected run doubled for as long as that end is not after `now`,
    never past `limit_end` (`expected` > 0). The ETA (eta.py) expects outlived runs to end so too."""
    end = start + expected
    while end <= now and end < limit_end:
        expected *= 2
        end = start + expected
    return min(end, limit_end)
