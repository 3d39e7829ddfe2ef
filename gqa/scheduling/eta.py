"""When will each pending job start? The production pass, run forward.

Running jobs end at their expected end (their wall-time limit, scaled by how
much of its limits the team's past jobs actually used); at each end, and when
a pending job's --begin time comes, the pass runs again on what is left,
exactly as the dispatcher would. A job whose dependency is unmet never starts
in the replay (the states of the jobs it names stay as they are now), and a
job whose start depends on a job with no known end gets no ETA (None), rather
than a guess presented as a prediction.

The answer lists the jobs in the order they are predicted to start (one
pass's starts in that pass's order), which is the queue's start order: a
later pass ranks with the fair share the earlier starts used, since the
replay charges each run's GPU time to its team's usage as the store does
(and decays the rest with the half-life).

The replay keeps the queue in a QueueIndex (index.py), a copy of the
caller's where it keeps one: each replayed start and end is one change to
it, and each pass looks only at the jobs it could start, so a prediction
over a long queue costs the passes it replays, not the queue's length at
every one of them."""

import heapq
import statistics
from collections.abc import Mapping
from dataclasses import replace

from .fairshare import decay
from .index import QueueIndex, index_of
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
                   targets: set[str] | None = None, max_passes: int = 10_000,
                   most: int | None = None, runtimes: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """Predicted start time of each pending job (or of `targets` only, which
    can stop the replay early), in predicted start order. `ratios`: per-team
    runtime ratio. `most`: stop once that many starts are told (the rest None),
    as Slurm's backfill tests a bounded number of jobs. `runtimes`: job id ->
    its true run time, where known (a what-if for measuring what estimates
    cost an ETA): such a job ends after it, within its wall time, though it
    is still ranked by its estimate, as the pass ranks it."""
    ratios = ratios or {}

    def end_of(run: RunningJob) -> float:
        known = runtimes.get(run.id) if runtimes else None
        if known is None:
            return _expected_end(run, ratios)
        return run.started_at + (min(known, run.wall_time) if run.wall_time else known)

    wanted = set(targets) if targets is not None else {j.id for j in snap.pending}
    starts: dict[str, float | None] = {}
    index = _replay_index(snap)
    ends: list[tuple[float, str]] = []       # (expected end, job id) of running jobs
    for run in index.running.values():
        heapq.heappush(ends, (_not_before(end_of(run), run, snap.now), run.id))
    now = snap.now
    used: dict[str, float] = {}     # GPU-seconds the replay's runs add to each team's usage since snap.now
    for _ in range(max_passes):
        usage = {team: decay(u, now - snap.now, snap.policy.half_life) for team, u in snap.usage.items()}
        for team, seconds in used.items():
            usage[team] = usage.get(team, 0.0) + seconds
        current = replace(snap, now=now, pending=index.pending_view, running=index.running_view, usage=usage)
        for start in plan(current, explain=False).starts:
            job = index.remove(start.job_id)
            starts[job.id] = now
            run = _as_running(job, start.gpus, now, start.wall_time)
            index.start(run)
            heapq.heappush(ends, (end_of(run), job.id))
        if wanted <= starts.keys() or not index.pending or (most is not None and len(starts) >= most):
            break
        # the next thing that can change the plan: a running job's end, or a --begin time coming
        following = min(ends[0][0] if ends else INF, _next_begin(index, now))
        if following == INF:
            break  # nothing we can see will free GPUs
        # what runs until then is charged to its team, as the store's usage counts it (fairshare.py)
        for team, gpus in index.team_gpus.items():
            if gpus:
                used[team] = used.get(team, 0.0) + gpus * (following - now)
        now = following
        while ends and ends[0][0] <= now:
            job_id = heapq.heappop(ends)[1]
            if job_id in index.running:
                index.stop(job_id)
    for job_id in index.pending:
        starts.setdefault(job_id, None)
    return {k: v for k, v in starts.items() if targets is None or k in wanted}


def _replay_index(snap: Snapshot) -> QueueIndex:
    """The replay's own index: a copy of the one the caller keeps (O(n)), else one built for the snapshot."""
    kept = index_of(snap.pending, snap.running)
    if kept is not None and kept.policy is snap.policy and kept.gpus is snap.gpus and kept.ranked.now <= snap.now:
        return kept.copy()
    return QueueIndex.of(snap.gpus, snap.policy, snap.pending, snap.running, snap.now)


def _next_begin(index: QueueIndex, now: float) -> float:
    return min((job.begin for job in index.gated_jobs() if job.begin is not None and job.begin > now), default=INF)


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
