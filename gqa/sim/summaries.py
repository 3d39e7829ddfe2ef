"""A replay's jobs as `JobSummary` rows, the rows `gqa history` and `gqa
report` read of a real queue, so a policy on a trace is reported the way the
queue's own jobs are. Times stay seconds from the trace's first arrival."""

from __future__ import annotations

from ..models.accounting import WAIT_GPUS, JobSummary
from ..models.job import JobState
from .engine import Outcome, SimResult
from .workload import SimJob, Workload


def job_summaries(result: SimResult, work: Workload) -> list[JobSummary]:
    """One row per job, in arrival order. A replayed job waits only for GPUs or
    its team's quota (preempted or reclaimed ones again after each attempt),
    succeeds, or is stopped at its wall time; one that never started is queued."""
    jobs = {j.id: j for j in work.jobs}
    end = max((o.end for o in result.outcomes if o.end is not None), default=0.0)
    return [_summary(o, jobs[o.id], end) for o in result.outcomes]


def _summary(o: Outcome, job: SimJob, end_of_replay: float) -> JobSummary:
    if o.end is None:
        state = JobState.QUEUED if o.start is None else JobState.RUNNING
    else:
        state = JobState.TIMED_OUT if o.timed_out else JobState.SUCCEEDED
    ran = o.gpu_seconds / o.gpus if o.gpus else 0.0
    until = o.end if o.end is not None else end_of_replay
    waited = max(0.0, until - o.submit - ran)
    return JobSummary(
        id=o.id, group=o.id, array_index=None, name=o.id, team=o.team, owner=job.user, tier=job.tier, state=state,
        gpus=o.gpus, gpu_type=o.gpu_type, submitted_at=o.submit, first_start=o.start, ended_at=o.end, elapsed=ran,
        wait=None if o.start is None else o.start - o.submit, gpu_hours=o.gpu_seconds / 3600, cost=o.cost,
        attempts=o.attempts, error_retries=0, reclaims=o.reclaims, interruptions=o.preemptions + o.reclaims,
        exit_code=0 if state == JobState.SUCCEEDED else None, signal=None, reason="", wall_time=o.wall_time,
        gpu_util=None, gpu_memory=None, waited=((WAIT_GPUS, waited),) if waited > 0 else ())
