"""The discrete-event loop: arrivals and completions move the clock; at each
moment where something happened, `plan()` is asked and its decisions are
applied. The engine decides nothing itself: it keeps time, GPUs and the books.

Preemption and spot reclaims share one path, `_requeue`: the attempt stops,
its GPUs come back, the work since the last checkpoint is lost, and the job
goes back to pending with its original submit time and seq (its place)."""

import heapq
import inspect
import math
import random
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from ..models.records import rebuilt_with, with_changes
from ..scheduling import Gpu, PendingJob, Policy, RunningJob, Snapshot, plan
from ..scheduling.index import QueueIndex
from ..scheduling.eta import expected_runtime, longest_runs, mean_share, runtime_ratio
from ..scheduling.fairshare import decay
from ..scheduling.ranking import ranks_by_expected_runtime, ranks_by_usage
from .spot_facts import NOTICE_SECONDS
from .workload import SimJob, Workload

END, RECLAIM, WAKE = 0, 1, 2   # event kinds; at one moment ends are handled before reclaims. WAKE: a pass only
MAX_PASSES_AT_ONCE = 8       # after preemptions free GPUs, plan() is asked again at the same moment
RATIO_SAMPLES = 500          # per team, as the local store keeps its recent run times
RATIO_REFRESH = 200          # finished jobs between refreshes of the teams' run-time ratios
# the reclaims after which the replay gives a job up: a run that cannot outlast a reclaim between
# checkpoints (100 hours on spot at 0.5 reclaims an hour, no checkpoint within it) was reclaimed
# forever and the replay never ended, and one that keeps work once in e^5 tries (10 reclaims an hour
# against 30-minute checkpoints) needs 148 tries per half hour of work. At the worst rate measured
# (spot_facts: 0.52 an hour) 10,000 reclaims come in 2.2 years of running on spot
MAX_RECLAIMS = 10_000


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
    cost: float = 0.0                 # those GPU-seconds at their GPUs' price per hour
    gpu_type: str | None = None       # the type of the GPUs its last attempt held
    eta: float | None = None          # the start predicted at submit, where an ETA was asked for
    tier: int = 1                     # its priority tier (0 high, 1 normal, 2 low), as the workload gives it
    given_up: bool = False            # reclaimed MAX_RECLAIMS times: left unfinished


@dataclass
class SimResult:
    policy: str
    gpus: int
    outcomes: list[Outcome]           # in arrival order
    passes: int = 0                   # plan() calls
    gpu_seconds_by_pool: dict[str, float] = field(default_factory=dict)
    arrival_window: tuple[float, float] = (0.0, 0.0)  # first and last arrival
    gpu_seconds_in_window: float = 0.0                 # GPU time used between them

    @property
    def unfinished(self) -> int:
        return sum(1 for o in self.outcomes if o.end is None)

    @property
    def given_up(self) -> int:
        return sum(1 for o in self.outcomes if o.given_up)


def cluster(n: int, gpu_type: str = "gpu") -> tuple[Gpu, ...]:
    return tuple(Gpu(i, gpu_type) for i in range(n))


def simulate(work: Workload, gpus: tuple[Gpu, ...], policy: Policy, *, name: str = "",
             checkpoint_interval: float = 1800.0, pool_of: dict[int, str] | None = None,
             reclaim_per_hour: dict[str, float] | None = None, seed: int = 0, eta=None,
             eta_every: int = 1, may_preempt: bool | None = None, oracle: bool = False,
             save_on_notice: bool = False, save_on_preempt: bool = False, restart_cost: float = 0.0) -> SimResult:
    """`pool_of`: GPU index -> pool name for the books (default: the GPU type);
    `reclaim_per_hour`: pool -> the chance per hour that a running job there
    loses its (spot) capacity. `eta(snapshot, job ids, ratios, shares, longest)
    -> {id: predicted start}` is asked as every `eta_every`-th job arrives, with
    each team's median and mean share of its limits used (the ranking's, as of
    the last refresh, and the ETA's, as the team's finished jobs stand then:
    eta.py) and its longest run (the ETA's too). `may_preempt`: plan() may stop
    running jobs, so a pass is worth it even with no GPU free (default: the
    policy preempts some tier). `oracle`: plan() is handed each job's true run
    time (as cut by its wall time) as both its expected run time and its wall
    time: exact reservations, the bound no real scheduler reaches.
    `save_on_notice`: a reclaimed job saves a checkpoint when the interruption
    notice (NOTICE_SECONDS) comes, so it keeps its work up to the notice (the
    save takes part of the notice, at most all of it; the rest is idle); else
    only up to its last periodic checkpoint. `restart_cost`: seconds each
    resumed attempt (after a preemption or a reclaim) spends reloading its
    checkpoint and warming up before it does new work."""
    if restart_cost < 0:
        raise ValueError(f"restart_cost must be >= 0 seconds, not {restart_cost}")
    slices_only = False   # plan() preempts only by time slicing: a pass is worth it only where slicing may
    if may_preempt is None:
        may_preempt = bool(getattr(policy, "preempt_tiers", ()) or getattr(policy, "slice_tiers", ()))
        slices_only = may_preempt and not getattr(policy, "preempt_tiers", ())
    pool_of = pool_of or {g.index: g.type for g in gpus}
    engine = _Engine(work, tuple(gpus), policy, name, checkpoint_interval, pool_of, reclaim_per_hour or {},
                     seed, eta, max(1, eta_every), may_preempt, oracle)
    engine.slices_only = slices_only
    engine.save_on_notice, engine.save_on_preempt, engine.restart_cost = save_on_notice, save_on_preempt, restart_cost
    return engine.run()


class _Engine:
    save_on_notice, save_on_preempt, restart_cost = False, False, 0.0   # see simulate()
    slices_only = False

    def __init__(self, work, gpus, policy, name, checkpoint_interval, pool_of, reclaim_per_hour, seed, eta,
                 eta_every, may_preempt, oracle=False):
        self.jobs: list[SimJob] = sorted(work.jobs, key=lambda j: (j.submit, j.seq))
        self.by_id = {j.id: j for j in self.jobs}
        self.gpus, self.policy, self.teams, self.pool_of = gpus, policy, work.teams, pool_of
        # the pending and running jobs, kept as the pass reads them: each change costs O(log n)
        self.index = QueueIndex(self.gpus, policy)
        self.pending, self.running, self.free = self.index.pending, self.index.running, self.index.free
        self.gpu_of = {g.index: g for g in gpus}
        self.checkpoint = checkpoint_interval
        self.reclaim = {p: r / 3600.0 for p, r in reclaim_per_hour.items() if r > 0}
        self.rng = random.Random(seed)
        self.eta, self.eta_every, self.may_preempt = eta, eta_every, may_preempt
        self.oracle = oracle
        # whether a decision reads a waiting job's expected run time (the order, or ETAs adding them up);
        # else re-estimating what waits is work nothing reads (a start estimates afresh)
        self.ranks_estimates = eta is not None or ranks_by_expected_runtime(policy)
        # whether anything reads the teams' usage: the multifactor order's fair share, or ETAs; arrival
        # order and SJF never do, so a replay under them spares every pass the sum
        self.reads_usage = eta is not None or ranks_by_usage(policy)
        self.slicing = bool(getattr(policy, "slice_tiers", ()))
        self.waking = math.inf   # the WAKE event due, if any
        # the replay reads only the decisions: spare plan() the explanations where it can
        self.plan_options = {"explain": False} if "explain" in inspect.signature(plan).parameters else {}
        self.out = {j.id: Outcome(j.id, j.team, j.gpus, j.submit, j.duration, j.wall_time, tier=j.tier)
                    for j in self.jobs}
        self.result = SimResult(policy=name, gpus=len(gpus), outcomes=[self.out[j.id] for j in self.jobs])
        if self.jobs:
            self.result.arrival_window = (self.jobs[0].submit, self.jobs[-1].submit)
        self.sizes = self.index.sizes                  # GPU counts of pending jobs, for the fast path
        # what every pass's snapshot shares (the index's live views): a pass copies it with its time and usage
        self.kept = Snapshot(now=0.0, gpus=self.gpus, pending=self.index.pending_view,
                             running=self.index.running_view, teams=self.teams, policy=self.policy)
        # running jobs' GPU-seconds so far per team, as GPUs x now - sum(GPUs x started): O(teams) a pass
        self.held_gpus: Counter[str] = Counter()
        self.held_since: dict[str, float] = defaultdict(float)
        self.remaining = {j.id: j.duration for j in self.jobs}  # work left, after checkpoints
        self.attempt: dict[str, int] = defaultdict(int)
        self.events: list[tuple[float, int, int, str, int]] = []  # (time, kind, seq, job id, attempt)
        # fair-share books, kept as the local store keeps them: finished attempts
        # decay from when they ended, running ones count GPUs x elapsed (fairshare.with_running)
        self.charged: dict[str, tuple[float, float]] = {}     # team -> (GPU-seconds, as of)
        # what each team's jobs used of their wall time: the production estimate of run times
        self.samples: dict[str, deque] = defaultdict(lambda: deque(maxlen=RATIO_SAMPLES))
        self.ratios: dict[str, float] = {}      # median shares: the ranking's
        # mean shares: the ETA's, read as production reads them when it predicts (the samples as they
        # are then, queries.py), not as of the last refresh: nothing is re-ranked by them, and before a
        # replay's first RATIO_REFRESH finishes the ETA would else have no history and end every run at
        # its limit (on Alibaba, low pods of minutes predicted to wait weeks)
        self.shares: dict[str, float] = {}
        self.longest: dict[str, float] = {}     # each team's longest sampled run: the ETA's too
        # the teams with runs sampled since the ratios', and since the ETA's shares', last refresh: only
        # theirs are worked out again, and only the waiting jobs of a team whose ratio moved re-estimated
        self.unrated: set[str] = set()
        self.unshared: set[str] = set()
        self.finished_since_refresh = 0

    # -- the loop ----------------------------------------------------------------
    def run(self) -> SimResult:
        arrivals, i, n = self.jobs, 0, len(self.jobs)
        while i < n or self.events:
            now = arrivals[i].submit if i < n else math.inf
            if self.events and self.events[0][0] <= now:
                now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, kind, _, job_id, attempt = heapq.heappop(self.events)
                if kind == WAKE:
                    self.waking = math.inf
                elif self.attempt[job_id] == attempt and job_id in self.running:  # else a stale event
                    self._finish(job_id, now) if kind == END else self._requeue(job_id, now, "reclaim")
            arrived = []
            while i < n and arrivals[i].submit == now:
                self._arrive(arrivals[i])
                if arrivals[i].seq % self.eta_every == 0:
                    arrived.append(arrivals[i].id)
                i += 1
            if self.eta and arrived:  # asked before the pass, as a submitter asks on arrival
                self._predict(self._snapshot(now, count=False), arrived)
            for _ in range(MAX_PASSES_AT_ONCE):
                if not self.pending or not self._pass_may_decide(now):
                    break
                if not self._apply(plan(self._snapshot(now), **self.plan_options), now):
                    break  # nothing was preempted: nothing more to do at this moment
            if self.slicing and self.pending:
                self._wake_for_slicing(now)
        return self.result

    def _pass_may_decide(self, now: float) -> bool:
        """Whether a pass at `now` may start or preempt anything (one that may not is skipped). plan()
        starts a job only on free GPUs, all of a gang at once, so not even the smallest pending job
        fitting leaves preemption; time slicing alone stops only jobs it may stop now, only for a
        waiting job of their tier that is not demoted (preempt.Preemptor.victims_for), and only where
        they hold enough GPUs for one (QueueIndex.slicing_may_stop)."""
        if len(self.free) >= min(self.sizes):
            return True
        if not self.may_preempt or not self.slices_only:
            return self.may_preempt
        return bool(self.index.slicing_may_stop(now))

    def _wake_for_slicing(self, now: float) -> None:
        """A pass when time slicing next changes what a pass decides, as the local daemon wakes
        for it (QueueIndex.next_slicing_change)."""
        wake = self.index.next_slicing_change(now)
        if wake is not None and wake < self.waking:
            self.waking = wake
            heapq.heappush(self.events, (wake, WAKE, -1, "", 0))

    def _snapshot(self, now: float, count: bool = True) -> Snapshot:
        self.result.passes += count
        if self.may_preempt and getattr(self.policy, "preempt_tiers", ()):
            # victims of a higher tier are chosen by the work they would lose: tell plan() their checkpoints
            # (time slicing chooses by service, which the running jobs carry)
            running = tuple(with_changes(r, checkpointed_at=self._checkpointed_at(r, now))
                            for r in self.running.values())
            return with_changes(self.kept, now=now, usage=self._usage(now), pending=tuple(self.pending.values()),
                                running=running)
        return with_changes(self.kept, now=now, usage=self._usage(now))

    def _apply(self, decision, now: float) -> bool:
        """Applies a pass's decisions; True if it preempted (the freed GPUs await another pass)."""
        preempt = getattr(decision, "preempt", ())
        for job_id in preempt:
            if job_id not in self.running:
                raise SimulationError(f"plan() preempted {job_id}, which is not running")
            self._requeue(job_id, now, "preempt")
        for start in decision.starts:
            self._start(start.job_id, start.gpus, now)
        return bool(preempt)

    # -- transitions ---------------------------------------------------------------
    def _arrive(self, job: SimJob) -> None:
        wall, expected = job.wall_time, expected_runtime(job.wall_time, self.ratios.get(job.team, 1.0))
        if self.oracle:  # this attempt's true run: what is left, or its wall time if that comes first
            wall = expected = min(self.remaining[job.id], job.wall_time)
        self.index.add(PendingJob(
            id=job.id, team=job.team, user=job.user, tier=job.tier, gpus=job.gpus, submitted_at=job.submit,
            wall_time=wall, seq=job.seq, spot=job.spot, expected_runtime=expected, gpu_type=job.gpu_type,
            reclaims=self.out[job.id].reclaims, served=self.out[job.id].gpu_seconds))

    def _start(self, job_id: str, gpus: tuple[int, ...], now: float) -> None:
        job = self.pending.get(job_id)
        if job is None:
            raise SimulationError(f"plan() started {job_id}, which is not pending")
        busy = [g for g in gpus if g not in self.free]
        if busy or len(gpus) != job.gpus or len(set(gpus)) != len(gpus):
            raise SimulationError(f"plan() started {job_id} on GPUs {gpus}: needs {job.gpus}, busy {busy}")
        self.index.remove(job_id)
        expected = job.expected_runtime
        if not self.ranks_estimates and not self.oracle:   # not kept current while it waited
            expected = expected_runtime(job.wall_time, self.ratios.get(job.team, 1.0))
        self.index.start(RunningJob(id=job_id, team=job.team, user=job.user, gpus=tuple(gpus), started_at=now,
                                    wall_time=job.wall_time, expected_runtime=expected, tier=job.tier,
                                    submitted_at=job.submitted_at, served=self.out[job_id].gpu_seconds))
        self.held_gpus[job.team] += job.gpus
        self.held_since[job.team] += job.gpus * now
        out = self.out[job_id]
        out.attempts += 1
        if out.start is None:
            out.start = now
        self.attempt[job_id] += 1
        end, kind = now + min(self.remaining[job_id], job.wall_time), END
        rate = max((self.reclaim.get(self.pool_of[g], 0.0) for g in gpus), default=0.0)
        if rate:  # exponential time to the next reclaim of this job's capacity
            lost_at = now + self.rng.expovariate(rate)
            if lost_at < end:
                end, kind = lost_at, RECLAIM
        heapq.heappush(self.events, (end, kind, self.by_id[job_id].seq, job_id, self.attempt[job_id]))

    def _stop(self, job_id: str, now: float) -> float:
        """Ends the attempt's hold on its GPUs and books it; returns its run time."""
        run = self.index.stop(job_id)
        elapsed, n = now - run.started_at, len(run.gpus)
        self.held_gpus[run.team] -= n
        self.held_since[run.team] -= n * run.started_at
        value, as_of = self.charged.get(run.team, (0.0, now))
        self.charged[run.team] = (decay(value, now - as_of, self.policy.half_life) + n * elapsed, now)
        out = self.out[job_id]
        out.gpu_seconds += n * elapsed
        out.cost += elapsed / 3600 * sum(self.gpu_of[i].price for i in run.gpus)
        out.gpu_type = self.gpu_of[run.gpus[0]].type if run.gpus else out.gpu_type
        first, last = self.result.arrival_window
        self.result.gpu_seconds_in_window += n * max(0.0, min(now, last) - max(run.started_at, first))
        books = self.result.gpu_seconds_by_pool
        for index in run.gpus:
            pool = self.pool_of[index]
            books[pool] = books.get(pool, 0.0) + elapsed
        return elapsed

    def _finish(self, job_id: str, now: float) -> None:
        elapsed = self._stop(job_id, now)
        out = self.out[job_id]
        out.end = now
        out.timed_out = self.remaining[job_id] > elapsed  # the wall time came first
        self.remaining[job_id] = 0.0
        if not out.timed_out and out.attempts == 1:  # as production samples its successful jobs
            self.samples[out.team].append((elapsed, out.wall_time))
            self.unrated.add(out.team)
            self.unshared.add(out.team)
            self.finished_since_refresh += 1
            if self.finished_since_refresh >= RATIO_REFRESH:
                self._refresh_ratios()

    def _refresh_ratios(self) -> None:
        """New run-time ratios, applied to what waits (as a fresh snapshot would)."""
        self.finished_since_refresh = 0
        moved = set()
        for team in self.unrated:
            ratio = runtime_ratio(list(self.samples[team]))
            if self.ratios.get(team) != ratio:
                moved.add(team)
            self.ratios[team] = ratio
        self.unrated.clear()
        if self.oracle or not self.ranks_estimates or not moved:
            return  # what waits already knows its true run time, nothing reads its estimate, or none moved
        changed = []
        for job in self.pending.values():
            if job.team not in moved:
                continue   # its expected run time is its team's ratio's, which stands
            expected = expected_runtime(job.wall_time, self.ratios.get(job.team, 1.0))
            if expected != job.expected_runtime:
                changed.append(rebuilt_with(job, expected_runtime=expected))   # kept: read pass after pass
        self.index.replace_many(changed)

    def _requeue(self, job_id: str, now: float, cause: str) -> None:
        """Back to pending in its old place; only work up to the last periodic
        checkpoint survives, or, reclaimed with save_on_notice, up to the
        notice. A resumed attempt's first restart_cost seconds did no work:
        they are kept only past them; the next attempt owes them again."""
        started = self.running[job_id].started_at
        self._stop(job_id, now)
        saved = self._checkpointed_at_time(started, now)
        if cause == "reclaim" and self.save_on_notice:
            saved = max(saved, now - NOTICE_SECONDS)
        elif cause == "preempt" and self.save_on_preempt:
            saved = now
        out = self.out[job_id]
        owed = self.restart_cost if out.preemptions + out.reclaims else 0.0  # this attempt was a resume
        kept = max(saved - started, owed)
        self.remaining[job_id] = max(0.0, self.remaining[job_id] - kept) + self.restart_cost
        self.attempt[job_id] += 1  # the attempt's pending end event is now stale
        if cause == "preempt":
            out.preemptions += 1
        else:
            out.reclaims += 1
            if out.reclaims >= MAX_RECLAIMS:
                out.given_up = True   # not queued again: it stays unfinished
                return
        self._arrive(self.by_id[job_id])

    def _checkpointed_at_time(self, started: float, now: float) -> float:
        if self.checkpoint <= 0:
            return started
        return started + math.floor((now - started) / self.checkpoint) * self.checkpoint

    def _checkpointed_at(self, run: RunningJob, now: float) -> float | None:
        at = self._checkpointed_at_time(run.started_at, now)
        return at if at > run.started_at else None

    # -- books ---------------------------------------------------------------------
    def _usage(self, now: float) -> dict[str, float]:
        if not self.reads_usage:
            return {}
        half_life = self.policy.half_life
        usage = {team: decay(value, now - as_of, half_life) for team, (value, as_of) in self.charged.items()}
        for team, gpus in self.held_gpus.items():   # fairshare.with_running, from the running totals
            if gpus:
                usage[team] = usage.get(team, 0.0) + max(0.0, gpus * now - self.held_since[team])
        return usage

    def _predict(self, snap: Snapshot, arrived: list[str]) -> None:
        if self.unshared:
            teams = {team: self.samples[team] for team in self.unshared}
            self.shares.update((team, mean_share(list(s))) for team, s in teams.items())
            self.longest.update(longest_runs(teams))
            self.unshared.clear()
        predicted = self.eta(snap, arrived, self.ratios, self.shares, self.longest) or {}
        for job_id in arrived:
            self.out[job_id].eta = predicted.get(job_id)


def production_eta():
    """The production ETA (`gqa.scheduling.eta.predict_starts`) as the engine's
    hook, or None where this version of the core has none."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("gqa.scheduling.eta") is None:
        return None
    predict = getattr(importlib.import_module("gqa.scheduling.eta"), "predict_starts", None)
    if predict is None:
        return None

    def eta(snap: Snapshot, job_ids: list[str], ratios: dict[str, float] | None = None,
            shares: dict[str, float] | None = None, longest: dict[str, float] | None = None) -> dict[str, float | None]:
        return predict(snap, targets=set(job_ids), shares=shares, longest=longest)
    return eta
