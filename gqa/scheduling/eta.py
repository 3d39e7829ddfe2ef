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

A replay over a long queue hands each pass a window, not every pending job
(`_Window`): jobs that differ only by age (same tier, team, user, limited
array and resources) keep their order, so a pass can start no more of them
than fit at once, and the rest of them wait outside the window until those
start. Each pass costs what can start, not the queue's length, and it
starts exactly the jobs the whole queue's pass would."""

import heapq
import statistics
from collections import deque
from dataclasses import replace

from .fairshare import decay
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
                   most: int | None = None, window: bool = True) -> dict[str, float | None]:
    """Predicted start time of each pending job (or of `targets` only, which
    can stop the replay early), in predicted start order. `ratios`: per-team
    runtime ratio. `most`: stop once that many starts are told (the rest None),
    as Slurm's backfill tests a bounded number of jobs. `window`: False hands
    every pass the whole queue (what the window must agree with)."""
    ratios = ratios or {}
    wanted = set(targets) if targets is not None else {j.id for j in snap.pending}
    starts: dict[str, float | None] = {}
    ends: list[tuple[float, str]] = []       # (expected end, job id) of running jobs
    running: dict[str, RunningJob] = {}
    for run in snap.running:
        running[run.id] = run
        heapq.heappush(ends, (_not_before(_expected_end(run, ratios), run, snap.now), run.id))
    waiting = _Window(snap, whole=not window)
    now = snap.now
    used: dict[str, float] = {}     # GPU-seconds the replay's runs add to each team's usage since snap.now
    for _ in range(max_passes):
        usage = {team: decay(u, now - snap.now, snap.policy.half_life) for team, u in snap.usage.items()}
        for team, seconds in used.items():
            usage[team] = usage.get(team, 0.0) + seconds
        current = replace(snap, now=now, pending=waiting.jobs(), running=tuple(running.values()), usage=usage)
        for start in plan(current, explain=False).starts:
            job = waiting.pop(start.job_id)
            starts[job.id] = now
            run = _as_running(job, start.gpus, now, start.wall_time)
            running[job.id] = run
            heapq.heappush(ends, (_expected_end(run, ratios), job.id))
        if wanted <= starts.keys() or not waiting or (most is not None and len(starts) >= most):
            break
        # the next thing that can change the plan: a running job's end, or a --begin time coming
        following = min(ends[0][0] if ends else INF, waiting.next_begin(now))
        if following == INF:
            break  # nothing we can see will free GPUs
        # what runs until then is charged to its team, as the store's usage counts it (fairshare.py)
        for run in running.values():
            used[run.team] = used.get(run.team, 0.0) + len(run.gpus) * (following - now)
        now = following
        while ends and ends[0][0] <= now:
            running.pop(heapq.heappop(ends)[1], None)
    for job_id in waiting.left():
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


class _Window:
    """The pending jobs a replayed pass is handed. Jobs alike but for their
    age (one bucket: tier, team, user, an array with a limit, resources,
    limits, nice) are served oldest first, and a pass starts at most as many
    of one bucket as fit the machine at once; so each bucket shows its first
    that many (plus the reservations a pass may give), and a job further back
    joins as those start. Jobs the gate may treat apart (a dependency, a
    --begin) are always in; held ones never start in a replay (nothing
    releases them), so one per team stays in, which keeps the team's share
    counted. A singleton dependency reads every pending job: no window then."""

    def __init__(self, snap: Snapshot, *, whole: bool = False):
        gpus = len(snap.gpus)
        self.always: dict[str, PendingJob] = {}
        self.held: dict[str, PendingJob] = {}
        self.buckets: dict[tuple, deque[PendingJob]] = {}
        self.fits: dict[tuple, int] = {}
        whole = whole or any(j.dependency and "singleton" in j.dependency for j in snap.pending)
        extra = max(0, snap.policy.reservation_depth) + 1
        for job in sorted(snap.pending, key=lambda j: (j.submitted_at, j.seq, j.id)):
            if whole or job.dependency or job.begin is not None:
                self.always[job.id] = job
            elif job.held or job.user_hold:
                self.held[job.id] = job
            else:
                key = _bucket(job)
                if key not in self.buckets:
                    self.buckets[key] = deque()
                    self.fits[key] = _at_once(job, gpus, snap.cpus) + extra
                self.buckets[key].append(job)
        self.teams: dict[str, PendingJob] = {}
        for job in self.held.values():
            self.teams.setdefault(job.team, job)

    def __bool__(self) -> bool:
        return bool(self.always) or any(self.buckets.values())

    def jobs(self) -> tuple[PendingJob, ...]:
        out = list(self.always.values()) + list(self.teams.values())
        for key, bucket in self.buckets.items():
            fits = self.fits[key]
            out += bucket if len(bucket) <= fits else [bucket[i] for i in range(fits)]
        return tuple(out)

    def pop(self, job_id: str) -> PendingJob:
        job = self.always.pop(job_id, None)
        if job is not None:
            return job
        for key, bucket in self.buckets.items():   # a started job is near its bucket's head
            for n in range(min(len(bucket), self.fits[key])):
                if bucket[n].id == job_id:
                    job = bucket[n]
                    del bucket[n]
                    return job
        raise KeyError(job_id)   # held jobs never start in a replay

    def next_begin(self, now: float) -> float:
        return min((j.begin for j in self.always.values() if j.begin is not None and j.begin > now), default=INF)

    def left(self) -> list[str]:
        return [*self.always, *self.held, *(j.id for b in self.buckets.values() for j in b)]


def _bucket(job: PendingJob) -> tuple:
    return (job.tier, job.team, job.user, job.group if job.group_limit else None, job.gpus, job.gpu_type,
            job.gpu_types, job.cpus, job.memory, job.wall_time, job.expected_runtime, job.time_min, job.spot,
            job.reclaims, job.exclusive, job.max_gpu_hours, job.nice)


def _at_once(job: PendingJob, gpus: int, cpus: int | None) -> int:
    """How many such jobs one pass could start together (every pending job when nothing bounds them)."""
    if job.exclusive:
        return 1
    if job.gpus:
        return gpus // job.gpus
    return cpus // job.cpus_counted if cpus is not None else 1 << 30
