"""One snapshot of where everything stands, for `gqa top` and `gqa ui`:
every GPU and the job on it, the head of the queue with its reasons, each
team against its quota and budget, and the latest transitions.

It composes the read-only services rather than counting anything again: the
queue's order, reasons and start estimates are QueryService's, the GPUs a
team holds QuotaService's, spend CostService's, and a running job's time
`models.accounting.summarise`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ..models.accounting import summarise
from ..models.job import JobRecord, JobState
from ..ports import Admissions, Clock, JobEvent, JobStore, RecentEvents
from ..scheduling import snapshot as scheduling
from .cost import CostService
from .queries import QueryService
from .snapshot import RatiosInUse
from .quota import QuotaService

HEAD = 20                  # pending jobs an overview carries (a screen shows fewer)
EVENTS = 20                # latest transitions it carries
EVENT_WINDOW = 24 * 3600   # seconds: older transitions are not "recent"


@dataclass(frozen=True)
class RunningJob:
    """A job holding GPUs (or CPUs only), as a live view shows it."""

    id: str
    name: str
    owner: str
    team: str
    status: str                  # UserStatus: "running" or "starting"
    gpus: tuple[int, ...]        # the GPU indices it holds
    started_at: float | None
    elapsed: float               # seconds this attempt has run
    time_left: float | None      # seconds until its wall time; None: no limit, or not started
    gpu_util: float | None       # mean utilisation % over its run, where measured
    gpu_memory: float | None     # peak memory MiB, where measured
    reason: str                  # a launched job's wait for its backend, else its last reason


@dataclass(frozen=True)
class GpuSlot:
    index: int
    type: str
    spot: bool                   # the spot pool, else on demand
    job: RunningJob | None       # the job on it; None: free


@dataclass(frozen=True)
class HeadEntry:
    """A pending job near the head of the queue."""

    position: int | None         # 1 = next to start; None: not in the running order (retrying, approval)
    id: str
    name: str
    owner: str
    team: str
    tier: int
    gpus: int
    status: str                  # UserStatus: "pending", "held", "retrying", ...
    submitted_at: float
    eta: float | None            # predicted start (epoch seconds)
    reason: str


@dataclass(frozen=True)
class TeamLoad:
    team: str
    gpus_held: int
    max_gpus: int | None         # None: no cap
    spend: float                 # this budget period so far, running attempts included
    budget: float | None         # per period; None: no budget


@dataclass(frozen=True)
class Overview:
    at: float                    # when it was read
    period: str                  # the budget period the spend is of ("2026-12")
    gpus: list[GpuSlot]
    running: list[RunningJob]    # every job holding resources, CPU-only ones included
    pending: int                 # how many jobs wait in all
    head: list[HeadEntry]        # the first of them, in start order
    teams: list[TeamLoad]
    events: list[JobEvent]       # the latest transitions, newest first

    @property
    def free_gpus(self) -> int:
        return sum(1 for g in self.gpus if g.job is None)

    @property
    def outside_gpus(self) -> list[int]:
        """GPUs jobs hold that `gpus` no longer has: a daemon restarted with fewer GPUs
        adopts the jobs still running on the others, which hold them until they end."""
        own = {g.index for g in self.gpus}
        return sorted({i for j in self.running for i in j.gpus} - own)


class OverviewService:
    def __init__(self, store: JobStore, events: RecentEvents, clock: Clock, admissions: Admissions | None = None,
                 ratios: RatiosInUse | None = None):
        """`events` is usually the store itself (its RecentEvents reads); `ratios` as QueryService's."""
        self.store, self.events, self.clock, self.admissions = store, events, clock, admissions
        self.ratios = ratios

    def overview(self, *, head: int = HEAD, events: int = EVENTS) -> Overview:
        store = cast(JobStore, _ReadOnce(self.store))    # one read of the live jobs for every service below
        queue = QueryService(store, self.clock, self.admissions, self.ratios).queue()
        now = self.clock.now()
        running = [_running(job, now) for job in queue.running]
        on_gpu = {index: job for job in running for index in job.gpus}
        inventory = store.inventory()
        gpus = [GpuSlot(g.index, g.type, g.spot, on_gpu.get(g.index)) for g in (inventory.gpus if inventory else ())]
        entries = [HeadEntry(e.position, e.job.id, e.job.name, e.job.owner, e.job.team, e.job.tier, e.job.gpus,
                             e.job.status.value, e.job.submitted_at, e.eta, e.reason)
                   for e in queue.pending[:max(0, head)]]
        cost = CostService(store, self.clock).report()
        spend = {t.team: t for t in cost.teams}
        quotas = {q.team: q for q in QuotaService(store).show().teams}
        teams = [TeamLoad(name, quotas[name].gpus_in_use if name in quotas else 0,
                          quotas[name].policy.max_gpus if name in quotas else None,
                          spend[name].total if name in spend else 0.0,
                          spend[name].budget if name in spend else quotas[name].policy.budget)
                 for name in sorted(set(quotas) | set(spend))]
        recent = self.events.recent_events(since=now - EVENT_WINDOW, limit=events) if events > 0 else []
        return Overview(now, cost.period, gpus, running, len(queue.pending), entries, teams, recent)


class _ReadOnce:
    """The store, its reads of the live jobs and the settings made once: the
    queue's listing, its pass, the quotas and the spend then count the same
    jobs, as one state of the store held them, and a frame costs one read of
    them, not three."""

    CACHED = frozenset({"queue_listing", "inventory", "policy", "teams", "team_members"})

    def __init__(self, store: JobStore):
        self._store = store
        self._read: dict[str, Any] = {}

    def scheduling_view(self) -> tuple[list[scheduling.PendingJob], list[scheduling.RunningJob]]:
        """The listing's own view: the GPUs a team holds are those of the jobs the frame shows."""
        listing = self.queue_listing()
        return listing.pending, listing.running

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if name not in self.CACHED:
            return method

        def once() -> Any:
            if name not in self._read:
                self._read[name] = method()
            return self._read[name]
        return once


def _running(job: JobRecord, now: float) -> RunningJob:
    started = job.state == JobState.RUNNING and job.started_at is not None
    elapsed = summarise(job, now).elapsed if started else 0.0
    wall = job.attempt_wall_time
    return RunningJob(job.id, job.name, job.owner, job.team, job.status.value, tuple(job.assigned),
                      job.started_at if started else None, elapsed,
                      max(0.0, wall - elapsed) if wall and started else None,
                      job.gpu_util, job.gpu_memory, job.reason)
