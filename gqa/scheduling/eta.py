"""When will each pending job start? The production pass, run forward.

Running jobs end at their expected end (their wall-time limit, scaled by how
much of its limits the team's past jobs actually used); at each end, and when
a pending job's --begin time comes, the pass runs again on what is left,
exactly as the dispatcher would. A job whose dependency is unmet never starts
in the replay (the states of the jobs it names stay as they are now), and a
job whose start depends on a job with no known end gets no ETA (None), rather
than a guess presented as a prediction."""

import heapq
import statistics
from dataclasses import replace

from .plan import plan
from .snapshot import PendingJob, RunningJob, Snapshot

INF = float("inf")
MIN_RATIO, DEFAULT_RATIO = 0.05, 1.0


def runtime_ratio(samples: list[tuple[float, float]]) -> float:
    """Median of actual run time / wall-time limit over (actual, limit) samples:
    users ask for more than they use, and teams do so consistently."""
    ratios = [min(1.0, actual / limit) for actual, limit in samples if limit and limit > 0 and actual >= 0]
    if not ratios:
        return DEFAULT_RATIO
    return max(MIN_RATIO, statistics.median(ratios))


def expected_runtime(wall_time: float | None, ratio: float) -> float | None:
    return wall_time * ratio if wall_time else None


def predict_starts(snap: Snapshot, *, ratios: dict[str, float] | None = None,
                   targets: set[str] | None = None, max_passes: int = 10_000) -> dict[str, float | None]:
    """Predicted start time of each pending job (or of `targets` only, which
    can stop the replay early). `ratios`: per-team runtime ratio."""
    ratios = ratios or {}
    wanted = set(targets) if targets is not None else {j.id for j in snap.pending}
    starts: dict[str, float | None] = {}
    ends: list[tuple[float, str]] = []       # (expected end, job id) of running jobs
    running: dict[str, RunningJob] = {}
    for run in snap.running:
        running[run.id] = run
        heapq.heappush(ends, (_not_before(_expected_end(run, ratios), run, snap.now), run.id))
    pending = {j.id: j for j in snap.pending}
    now = snap.now
    for _ in range(max_passes):
        current = replace(snap, now=now, pending=tuple(pending.values()), running=tuple(running.values()))
        for start in plan(current, explain=False).starts:
            job = pending.pop(start.job_id)
            starts[job.id] = now
            run = _as_running(job, start.gpus, now, start.wall_time)
            running[job.id] = run
            heapq.heappush(ends, (_expected_end(run, ratios), job.id))
        if wanted <= starts.keys() or not pending:
            break
        # the next thing that can change the plan: a running job's end, or a --begin time coming
        begin = min((j.begin for j in pending.values() if j.begin is not None and j.begin > now), default=INF)
        following = min(ends[0][0] if ends else INF, begin)
        if following == INF:
            break  # nothing we can see will free GPUs
        now = following
        while ends and ends[0][0] <= now:
            running.pop(heapq.heappop(ends)[1], None)
    for job_id in pending:
        starts.setdefault(job_id, None)
    return {k: v for k, v in starts.items() if targets is None or k in wanted}


def _expected_end(run: RunningJob, ratios: dict[str, float], job: PendingJob | None = None) -> float:
    if job is not None and job.expected_runtime:
        return run.started_at + job.expected_runtime
    if run.expected_runtime:
        return run.started_at + run.expected_runtime
    if run.wall_time:
        return run.started_at + run.wall_time * ratios.get(run.team, DEFAULT_RATIO)
    return INF


def _not_before(end: float, run: RunningJob, now: float) -> float:
    """A job already past its expected end is still running: expect it halfway
    to its wall-time limit (nothing better is known), never in the past."""
    if end >= now:
        return end
    if run.wall_time:
        return now + max(0.0, run.ends_by - now) / 2
    return INF


def _as_running(job: PendingJob, gpus: tuple[int, ...], now: float, granted: float | None = None) -> RunningJob:
    """`granted`: the shorter wall time backfill gave it (--time-min), which bounds its run."""
    wall_time = granted or job.wall_time
    expected = min(job.expected_runtime, granted) if job.expected_runtime and granted else job.expected_runtime
    return RunningJob(id=job.id, team=job.team, user=job.user, gpus=gpus, started_at=now, cpus=job.cpus,
                      memory=job.memory, group=job.group, wall_time=wall_time, expected_runtime=expected,
                      exclusive=job.exclusive)
