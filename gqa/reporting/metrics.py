"""What a report counts, from the jobs of a period as `JobSummary` rows: queue
waits per tier over time, GPUs allocated (and measured busy) per pool, GPU-hours
and spend per team against budgets, outcomes, why jobs waited, and the jobs that
held GPUs idle. Pure: the rows, the period, the pools and the budgets in, one
`Report` out; the time the rows were summarised at (`now`) is passed in."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..models.stats import percentile
from ..models.accounting import JobSummary
from ..models.job import JobState
from ..models.priority import Priority
from ..scheduling.snapshot import Gpu

# time buckets: the smallest step that cuts the period into at most MAX_BUCKETS
STEPS = (1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 3 * 3600.0, 6 * 3600.0, 12 * 3600.0, 86400.0,
         7 * 86400.0, 28 * 86400.0)
MAX_BUCKETS = 60
IDLE_UTIL = 20.0        # a job whose GPUs were busy less than this (%) on average held them idle
IDLE_LISTED = 15        # idle jobs named in the table (all count in the total)
WAIT_LISTED = 8         # kinds of wait shown, longest first
WAIT_FLOOR = 1.0        # seconds: a kind of wait all jobs together spent less in (a local launch) is no reason


@dataclass(frozen=True)
class PoolSpec:
    """A pool of the inventory: one GPU type bought one way (Gpu.pool)."""
    gpu_type: str
    spot: bool
    gpus: int
    price: float = 0.0           # per GPU-hour

    @property
    def name(self) -> str:
        return f"{self.gpu_type} {'spot' if self.spot else 'on demand'}"


def pools_of(gpus: Iterable[Gpu]) -> tuple[PoolSpec, ...]:
    """The inventory's pools, in the order their first GPU is listed; a pool's
    price is its GPUs' mean."""
    found: dict[tuple[str, bool], list[Gpu]] = {}
    for gpu in gpus:
        found.setdefault(gpu.pool, []).append(gpu)
    return tuple(PoolSpec(kind, spot, len(g), sum(x.price for x in g) / len(g)) for (kind, spot), g in found.items())


@dataclass(frozen=True)
class ReportInput:
    rows: Sequence[JobSummary]
    since: float
    until: float
    now: float                                   # when the rows were summarised
    pools: Sequence[PoolSpec] = ()               # the inventory; empty: GPUs in use only, no shares
    budgets: Mapping[str, float] = field(default_factory=dict)   # team -> budget per calendar month
    title: str = "gqa report"
    relative: bool = False                       # times are seconds from a trace's start, not dates
    notes: Sequence[str] = ()                    # sentences printed under the title


@dataclass(frozen=True)
class TierWaits:
    tier: str
    p50: tuple[float | None, ...]                # per bucket, over the jobs that started in it
    p95: tuple[float | None, ...]
    started: tuple[int, ...]
    total_started: int
    overall_p50: float | None
    overall_p95: float | None
    longest: float | None
    waiting: int                                 # never started, still waiting at `now` (the rows must hold
                                                 # them: a history read with `waiting`)


@dataclass(frozen=True)
class PoolUse:
    name: str
    gpus: int | None                             # its size; None where the inventory is not known
    busy: tuple[float, ...]                      # mean GPUs allocated per bucket
    measured: tuple[float | None, ...]           # mean utilisation (%) of those measured, per bucket
    gpu_hours: float

    @property
    def share(self) -> tuple[float | None, ...]:
        return tuple(b / self.gpus if self.gpus else None for b in self.busy)

    @property
    def mean_share(self) -> float | None:
        return sum(self.busy) / (len(self.busy) * self.gpus) if self.gpus and self.busy else None

    @property
    def mean_measured(self) -> float | None:
        known = [m for m in self.measured if m is not None]
        return sum(known) / len(known) if known else None


@dataclass(frozen=True)
class TeamUse:
    team: str
    jobs: int
    gpu_hours: float
    cost: float
    budget: float | None                         # its monthly budget over the period's share of months

    @property
    def used(self) -> float | None:
        if self.budget is None:
            return None
        return self.cost / self.budget if self.budget > 0 else (0.0 if self.cost == 0 else math.inf)


@dataclass(frozen=True)
class WaitReason:
    why: str
    jobs: int
    seconds: float
    longest: float
    longest_job: str

    @property
    def mean(self) -> float:
        return self.seconds / self.jobs if self.jobs else 0.0


@dataclass(frozen=True)
class IdleJob:
    id: str
    name: str
    team: str
    owner: str
    gpus: int
    gpu_hours: float
    util: float
    wasted: float                                # GPU-hours not busy: gpu_hours x (1 - util)


@dataclass(frozen=True)
class Report:
    title: str
    since: float
    until: float
    relative: bool
    notes: tuple[str, ...]
    jobs: int
    step: float                                  # seconds per bucket
    times: tuple[float, ...]                     # each bucket's start
    waits: tuple[TierWaits, ...]
    pools: tuple[PoolUse, ...]
    teams: tuple[TeamUse, ...]
    outcomes: tuple[tuple[str, int], ...]
    wait_reasons: tuple[WaitReason, ...]
    idle: tuple[IdleJob, ...]
    idle_jobs: int
    wasted_gpu_hours: float
    measured_jobs: int                           # jobs whose GPU utilisation was measured


def build(given: ReportInput) -> Report:
    if given.until <= given.since:
        raise ValueError("a report's period must end after it starts")
    rows = [r for r in given.rows if in_period(r, given.since, given.until)]
    step = bucket_step(given.until - given.since)
    times = tuple(given.since + i * step for i in range(math.ceil((given.until - given.since) / step)))
    idle = idle_jobs(rows)
    return Report(
        title=given.title, since=given.since, until=given.until, relative=given.relative, notes=tuple(given.notes),
        jobs=len(rows), step=step, times=times, waits=tier_waits(rows, times, step, given.now, given.until),
        pools=pool_use(rows, times, step, given.pools, given.now), teams=team_use(rows, given.budgets, given.since,
                                                                                given.until, given.relative),
        outcomes=outcomes(rows), wait_reasons=wait_reasons(rows), idle=tuple(idle[:IDLE_LISTED]),
        idle_jobs=len(idle), wasted_gpu_hours=sum(j.wasted for j in idle),
        measured_jobs=sum(1 for r in rows if r.gpu_util is not None))


def in_period(row: JobSummary, since: float, until: float) -> bool:
    """Submitted before the period ends and not ended before it starts."""
    return row.submitted_at < until and (row.ended_at is None or row.ended_at >= since)


def bucket_step(span: float) -> float:
    for step in STEPS:
        if span / step <= MAX_BUCKETS:
            return step
    return math.ceil(span / MAX_BUCKETS)


def _bucket(at: float, times: tuple[float, ...], step: float) -> int | None:
    if not times or at < times[0]:
        return None
    i = int((at - times[0]) // step)
    return i if i < len(times) else None


def tier_waits(rows: Iterable[JobSummary], times: tuple[float, ...], step: float, now: float,
               until: float | None = None) -> tuple[TierWaits, ...]:
    """Waits (submission to first start) per tier, of the jobs that started in
    the period (from the first bucket's start to `until`, else to the last
    bucket's end): by the bucket each started in, and over them all. A job
    that started before the period waited before it too, and counts in none."""
    out = []
    rows = list(rows)
    end = until if until is not None else (times[0] + len(times) * step if times else 0.0)
    for priority in Priority:
        mine = [r for r in rows if r.tier == priority.rank]
        if not mine:
            continue
        per: list[list[float]] = [[] for _ in times]
        started = []
        for r in mine:
            if r.first_start is None or r.wait is None or r.first_start >= end:
                continue
            i = _bucket(r.first_start, times, step)
            if i is not None:
                per[i].append(r.wait)
                started.append(r)
        waits = [r.wait or 0.0 for r in started]
        out.append(TierWaits(
            tier=priority.value, p50=tuple(percentile(w, 50) for w in per), p95=tuple(percentile(w, 95) for w in per),
            started=tuple(len(w) for w in per), total_started=len(started), overall_p50=percentile(waits, 50),
            overall_p95=percentile(waits, 95), longest=max(waits) if waits else None,
            waiting=sum(1 for r in mine if r.first_start is None and not r.finished)))
    return tuple(out)


def run_spans(row: JobSummary, now: float) -> tuple[tuple[float, float], ...]:
    """When the job held GPUs: each attempt's run where the row has them; else
    (a record read without its transitions, a simulated job) one span ending
    at its end (or now, while it runs) as long as its attempts together."""
    if row.runs:
        return row.runs
    if row.first_start is None or row.elapsed <= 0:
        return ()
    if row.ended_at is not None:
        end = row.ended_at
    elif row.state in (JobState.RUNNING, JobState.STARTING):
        end = now
    else:
        end = row.first_start + row.elapsed
    return ((max(row.first_start, end - row.elapsed), end),)


def pool_of(row: JobSummary, pools: Sequence[PoolSpec]) -> str:
    """The pool a job ran in. A finished job's record no longer names its GPUs:
    its type and the price it paid per GPU-hour (spot is cheaper) tell; where
    the prices do not (unknown, or alike), a job that was reclaimed ran on
    spot, and any other on demand, where its type has such a pool."""
    fits = [p for p in pools if row.gpu_type in (None, p.gpu_type)]
    if not fits:
        return row.gpu_type or "any GPU"
    if len({p.price for p in fits}) > 1 and row.gpu_hours > 0 and row.cost > 0:
        rate = row.cost / row.gpu_hours
        return min(fits, key=lambda p: abs(p.price - rate)).name
    bought = [p for p in fits if p.spot == (row.reclaims > 0)]
    return (bought or fits)[0].name


def pool_use(rows: Iterable[JobSummary], times: tuple[float, ...], step: float, pools: Sequence[PoolSpec],
             now: float) -> tuple[PoolUse, ...]:
    busy: dict[str, list[float]] = {p.name: [0.0] * len(times) for p in pools}
    measured: dict[str, list[float]] = {p.name: [0.0] * len(times) for p in pools}
    weight: dict[str, list[float]] = {p.name: [0.0] * len(times) for p in pools}
    for r in rows:
        spans = run_spans(r, now)
        if not spans or r.gpus <= 0:
            continue
        name = pool_of(r, pools)
        for books in (busy, measured, weight):
            books.setdefault(name, [0.0] * len(times))
        for span in spans:
            first = max(0, int((span[0] - times[0]) // step)) if times else 0
            last = min(len(times) - 1, int((span[1] - times[0]) // step)) if times else -1
            for i in range(first, last + 1):     # only the buckets the span overlaps
                start = times[i]
                overlap = min(span[1], start + step) - max(span[0], start)
                if overlap > 0:
                    busy[name][i] += overlap * r.gpus
                    if r.gpu_util is not None:
                        measured[name][i] += overlap * r.gpus * r.gpu_util
                        weight[name][i] += overlap * r.gpus
    size = {p.name: p.gpus for p in pools}
    return tuple(PoolUse(name=name, gpus=size.get(name), busy=tuple(b / step for b in busy[name]),
                         measured=tuple(m / w if w else None for m, w in zip(measured[name], weight[name])),
                         gpu_hours=sum(busy[name]) / 3600) for name in busy)


def month_share(since: float, until: float) -> float:
    """How many calendar months (UTC) the period spans, in fractions of each."""
    total, at = 0.0, since
    while at < until:
        day = datetime.fromtimestamp(at, timezone.utc)
        first = datetime(day.year, day.month, 1, tzinfo=timezone.utc).timestamp()
        nxt = datetime(day.year + day.month // 12, day.month % 12 + 1, 1, tzinfo=timezone.utc).timestamp()
        total += (min(until, nxt) - at) / (nxt - first)
        at = nxt
    return total


def team_use(rows: Iterable[JobSummary], budgets: Mapping[str, float], since: float, until: float,
             relative: bool = False) -> tuple[TeamUse, ...]:
    """GPU-hours and spend of each team's jobs in the period, against its
    monthly budget times the months the period spans."""
    jobs: dict[str, list[JobSummary]] = {}
    for r in rows:
        jobs.setdefault(r.team, []).append(r)
    months = 0.0 if relative else month_share(since, until)
    names = sorted(set(jobs) | (set(budgets) if not relative else set()))
    return tuple(TeamUse(team=t, jobs=len(jobs.get(t, ())), gpu_hours=sum(r.gpu_hours for r in jobs.get(t, ())),
                         cost=sum(r.cost for r in jobs.get(t, ())),
                         budget=budgets[t] * months if t in budgets and not relative else None) for t in names)


# how jobs ended, and what happened to them on the way (a job may count in several of the second)
ENDS = ((JobState.SUCCEEDED, "succeeded"), (JobState.FAILED, "failed"), (JobState.TIMED_OUT, "timed out"),
        (JobState.CANCELLED, "cancelled"), (JobState.REJECTED, "rejected"))


def outcomes(rows: Iterable[JobSummary]) -> tuple[tuple[str, int], ...]:
    rows = list(rows)
    out = [(label, sum(1 for r in rows if r.state == state)) for state, label in ENDS]
    out += [("retried after an error", sum(1 for r in rows if r.error_retries > 0)),
            ("reclaimed (spot)", sum(1 for r in rows if r.reclaims > 0)),
            ("running or waiting", sum(1 for r in rows if not r.finished))]
    return tuple(out)


def wait_reasons(rows: Iterable[JobSummary]) -> tuple[WaitReason, ...]:
    """Each kind of wait: the jobs that had it, their time in it, the longest; most time first."""
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    longest: dict[str, tuple[float, str]] = {}
    for r in rows:
        for why, seconds in r.waited:
            total[why] = total.get(why, 0.0) + seconds
            count[why] = count.get(why, 0) + 1
            if seconds > longest.get(why, (-1.0, ""))[0]:
                longest[why] = (seconds, r.id)
    ordered = sorted((w for w in total if total[w] >= WAIT_FLOOR), key=lambda w: (-total[w], w))[:WAIT_LISTED]
    return tuple(WaitReason(w, count[w], total[w], longest[w][0], longest[w][1]) for w in ordered)


def idle_jobs(rows: Iterable[JobSummary], threshold: float = IDLE_UTIL) -> list[IdleJob]:
    """Jobs whose measured utilisation stayed under `threshold` %, most GPU-hours wasted first."""
    out = [IdleJob(r.id, r.name, r.team, r.owner, r.gpus, r.gpu_hours, r.gpu_util,
                   r.gpu_hours * (1 - r.gpu_util / 100))
           for r in rows if r.gpu_util is not None and r.gpu_util < threshold and r.gpu_hours > 0]
    return sorted(out, key=lambda j: (-j.wasted, j.id))
