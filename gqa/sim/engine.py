"""The discrete-event loop: arrivals and completions move the clock; at each
moment where something happened, `plan()` is asked once and its starts are
applied. The engine decides nothing itself: it keeps time, GPUs and the books.

Preemption and spot reclaims share one path, `_requeue`: the attempt stops,
its GPUs come back, the work since the last checkpoint is lost, and the job
goes back to pending with its original submit time and seq (its place)."""

import heapq
import inspect
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..scheduling import Gpu, PendingJob, Policy, RunningJob, Snapshot, plan
from ..scheduling.fairshare import decay
from .workload import SimJob, Workload

END, RECLAIM = 0, 1          # event kinds; at one moment ends are handled before reclaims


class SimulationError(RuntimeError):
    """plan() asked for something impossible (a busy GPU, an unknown job)."""


@dataclass(slots=True)
class Outcome:
    """One job's life in the replay."""
    id: str
    team: str
    gpus: int
    submit: float
    duration: float                   # true run time (the trace's)
    wall_time: float
    start: float | None = None        # first start
    end: float | None = None
    attempts: int = 0
    preemptions: int = 0              # stopped by plan() to make room
    reclaims: int = 0                 # spot capacity taken back
    timed_out: bool = False           # killed at its wall time
    gpu_seconds: float = 0.0          # held, lost work included
    eta: float | None = None          # the start predicted at submit, where an ETA function exists


@dataclass
class SimResult:
    policy: str
    gpus: int
    outcomes: list[Outcome]           # in arrival order
    passes: int = 0                   # plan() calls
    gpu_seconds_by_type: dict[str, float] = field(default_factory=dict)

    @property
    def unfinished(self) -> int:
        return sum(1 for o in self.outcomes if o.end is None)


def cluster(n: int, gpu_type: str = "gpu") -> tuple[Gpu, ...]:
    return tuple(Gpu(i, gpu_type) for i in range(n))


def simulate(work: Workload, gpus: tuple[Gpu, ...], policy: Policy, *, name: str = "",
             checkpoint_interval: float = 1800.0, reclaim_per_hour: dict[str, float] | None = None,
             seed: int = 0, eta=None) -> SimResult:
    """`reclaim_per_hour`: GPU type -> the chance per hour that a running job on
    it loses its (spot) capacity; `eta(snapshot) -> {job id: predicted start}`
    is asked for each job as it arrives."""
    return _Engine(work, gpus, policy, name, checkpoint_interval, reclaim_per_hour or {}, seed, eta).run()


class _Engine:
    def __init__(self, work, gpus, policy, name, checkpoint_interval, reclaim_per_hour, seed, eta):
        self.jobs: list[SimJob] = sorted(work.jobs, key=lambda j: (j.submit, j.seq))
        self.by_id = {j.id: j for j in self.jobs}
        self.gpus, self.policy, self.teams = tuple(gpus), policy, work.teams
        self.type_of = {g.index: g.type for g in self.gpus}
        self.free = set(self.type_of)
        self.checkpoint = checkpoint_interval
        self.reclaim = {t: r / 3600.0 for t, r in reclaim_per_hour.items() if r > 0}
        self.rng = random.Random(seed)
        self.eta = eta
        # the replay reads only the starts: spare plan() the explanations where it can
        self.plan_options = {"explain": False} if "explain" in inspect.signature(plan).parameters else {}
        self.out = {j.id: Outcome(j.id, j.team, j.gpus, j.submit, j.duration, j.wall_time) for j in self.jobs}
        self.result = SimResult(policy=name, gpus=len(self.gpus), outcomes=[self.out[j.id] for j in self.jobs])
        self.pending: dict[str, PendingJob] = {}      # insertion order: deterministic snapshots
        self.sizes: Counter[int] = Counter()           # GPU counts of pending jobs, for the fast path
        self.running: dict[str, RunningJob] = {}
        self.remaining = {j.id: j.duration for j in self.jobs}  # work left, after checkpoints
        self.attempt: dict[str, int] = defaultdict(int)
        self.events: list[tuple[float, int, int, str, int]] = []  # (time, kind, seq, job id, attempt)
        # fair-share books, kept as the local store keeps them: finished attempts
        # decay from when they ended, running ones count GPUs x elapsed
        self.charged: dict[str, tuple[float, float]] = {}     # team -> (GPU-seconds, as of)
        self.held: Counter[str] = Counter()                   # team -> GPUs held now
        self.held_since: Counter[str] = Counter()              # team -> sum of GPUs x started_at

    # -- the loop ----------------------------------------------------------------
    def run(self) -> SimResult:
        arrivals, i, n = self.jobs, 0, len(self.jobs)
        while i < n or self.events:
            now = arrivals[i].submit if i < n else math.inf
            if self.events and self.events[0][0] <= now:
                now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, kind, _, job_id, attempt = heapq.heappop(self.events)
                if self.attempt[job_id] == attempt and job_id in self.running:  # else a stale event
                    self._finish(job_id, now) if kind == END else self._requeue(job_id, now, "reclaim")
            arrived = []
            while i < n and arrivals[i].submit == now:
                self._arrive(arrivals[i])
                arrived.append(arrivals[i].id)
                i += 1
            snap = None
            if self.pending and len(self.free) >= min(self.sizes):
                # plan() can start a job only on free GPUs, all of a gang at once;
                # when not even the smallest pending job fits, a pass would be a
                # no-op, so it is skipped. (Once plan() may preempt, a waiting job
                # that can preempt must bypass this shortcut.)
                snap = self._snapshot(now)
                self._apply(plan(snap, **self.plan_options), now)
            if self.eta and arrived:
                self._predict(snap or self._snapshot(now), arrived, now)
        return self.result

    def _snapshot(self, now: float) -> Snapshot:
        self.result.passes += 1
        return Snapshot(now=now, gpus=self.gpus, pending=tuple(self.pending.values()),
                        running=tuple(self.running.values()), teams=self.teams, usage=self._usage(now),
                        policy=self.policy)

    def _apply(self, decision, now: float) -> None:
        for job_id in getattr(decision, "preempt", ()):  # plan() may learn to preempt
            if job_id not in self.running:
                raise SimulationError(f"plan() preempted {job_id}, which is not running")
            self._requeue(job_id, now, "preempt")
        for start in decision.starts:
            self._start(start.job_id, start.gpus, now)

    # -- transitions ---------------------------------------------------------------
    def _arrive(self, job: SimJob) -> None:
        self.pending[job.id] = PendingJob(
            id=job.id, team=job.team, user=job.user, tier=job.tier, gpus=job.gpus, submitted_at=job.submit,
            wall_time=job.wall_time, seq=job.seq, expected_runtime=job.wall_time)
        self.sizes[job.gpus] += 1

    def _start(self, job_id: str, gpus: tuple[int, ...], now: float) -> None:
        job = self.pending.pop(job_id, None)
        if job is None:
            raise SimulationError(f"plan() started {job_id}, which is not pending")
        busy = [g for g in gpus if g not in self.free]
        if busy or len(gpus) != job.gpus or len(set(gpus)) != len(gpus):
            raise SimulationError(f"plan() started {job_id} on GPUs {gpus}: needs {job.gpus}, busy {busy}")
        self.sizes[job.gpus] -= 1
        if not self.sizes[job.gpus]:
            del self.sizes[job.gpus]
        self.free.difference_update(gpus)
        self.running[job_id] = RunningJob(id=job_id, team=job.team, user=job.user, gpus=tuple(gpus),
                                          started_at=now, wall_time=job.wall_time)
        self.held[job.team] += job.gpus
        self.held_since[job.team] += job.gpus * now
        out = self.out[job_id]
        out.attempts += 1
        if out.start is None:
            out.start = now
        self.attempt[job_id] += 1
        end, kind = now + min(self.remaining[job_id], job.wall_time), END
        rate = self.reclaim.get(self.type_of[gpus[0]])
        if rate:  # exponential time to the next reclaim of this job's capacity
            lost_at = now + self.rng.expovariate(rate)
            if lost_at < end:
                end, kind = lost_at, RECLAIM
        heapq.heappush(self.events, (end, kind, self.by_id[job_id].seq, job_id, self.attempt[job_id]))

    def _stop(self, job_id: str, now: float) -> float:
        """Ends the attempt's hold on its GPUs and books it; returns its run time."""
        run = self.running.pop(job_id)
        elapsed = now - run.started_at
        self.free.update(run.gpus)
        gpu_seconds = len(run.gpus) * elapsed
        self.held[run.team] -= len(run.gpus)
        self.held_since[run.team] -= len(run.gpus) * run.started_at
        if not self.held[run.team]:
            self.held_since[run.team] = 0.0  # no float residue carried into later sums
        value, as_of = self.charged.get(run.team, (0.0, now))
        self.charged[run.team] = (decay(value, now - as_of, self.policy.half_life) + gpu_seconds, now)
        self.out[job_id].gpu_seconds += gpu_seconds
        pool = self.type_of[run.gpus[0]]
        self.result.gpu_seconds_by_type[pool] = self.result.gpu_seconds_by_type.get(pool, 0.0) + gpu_seconds
        return elapsed

    def _finish(self, job_id: str, now: float) -> None:
        elapsed = self._stop(job_id, now)
        out = self.out[job_id]
        out.end = now
        out.timed_out = self.remaining[job_id] > elapsed  # the wall time came first
        self.remaining[job_id] = 0.0

    def _requeue(self, job_id: str, now: float, cause: str) -> None:
        """Back to pending in its old place; only work up to the last periodic
        checkpoint survives."""
        elapsed = self._stop(job_id, now)
        kept = math.floor(elapsed / self.checkpoint) * self.checkpoint if self.checkpoint > 0 else 0.0
        self.remaining[job_id] = max(0.0, self.remaining[job_id] - kept)
        self.attempt[job_id] += 1  # the attempt's pending end event is now stale
        out = self.out[job_id]
        if cause == "preempt":
            out.preemptions += 1
        else:
            out.reclaims += 1
        self._arrive(self.by_id[job_id])

    # -- books ---------------------------------------------------------------------
    def _usage(self, now: float) -> dict[str, float]:
        half_life = self.policy.half_life
        usage = {team: decay(value, now - as_of, half_life) for team, (value, as_of) in self.charged.items()}
        for team, held in self.held.items():
            if held:
                usage[team] = usage.get(team, 0.0) + held * now - self.held_since[team]
        return usage

    def _predict(self, snap: Snapshot, arrived: list[str], now: float) -> None:
        predicted = self.eta(snap) or {}
        for job_id in arrived:
            out = self.out[job_id]
            out.eta = out.start if out.start is not None and out.start == now else predicted.get(job_id)


def production_eta():
    """The production ETA, where one exists: `gqa.scheduling.eta.estimate_starts(snapshot)
    -> {job id: predicted start}`. None until then (the ETA metrics stay null)."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("gqa.scheduling.eta") is None:
        return None
    return getattr(importlib.import_module("gqa.scheduling.eta"), "estimate_starts", None)
