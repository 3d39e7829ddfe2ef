"""`gqa cost`: each team's spend in a budget period against its budget, its
GPU-hours, and the costliest jobs.

Spend is what finished attempts cost (the store's ledger) plus, for the
current period, what the attempts running now have cost so far, at the price
of the GPUs they hold: the same figure the scheduler checks budgets against.

GPU-hours and the jobs' money are counted by attempt, as the ledger counts
spend: a job's attempts that ended in the period (settled) and, for the
current one, the attempt running now so far, whatever state the job is in
now (finished, running, or requeued and waiting to run again). They are read
through the history (its indexes by end time and of the jobs not finished)
from the period's start on, since a job that ended later may have run an
attempt in it: asked for by `gqa cost`, not by the live views, whose refresh
must not read a month of jobs."""

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..models.accounting import so_far
from ..models.errors import SpecError
from ..models.job import JobRecord, JobState
from ..models.times import AHEAD, EARLIEST
from ..ports import HISTORY_STATES, Clock, HistoryQuery, HistoryReads, SchedulingInputs
from ..scheduling.budget import period_of, running_cost, used_percent
from .settle import hourly_rate

PAGE = 1000        # jobs per history page read for GPU-hours
MOST_JOBS = 1000   # the costliest jobs a report may list

PERIOD_RE = re.compile(r"^(\d{4})-(\d{2})$")


@dataclass(frozen=True)
class TeamCost:
    team: str
    settled: float                 # finished attempts
    running: float                 # attempts running now, so far (current period only)
    budget: float | None           # per period; None: no budget

    @property
    def total(self) -> float:
        return self.settled + self.running

    @property
    def used(self) -> float | None:
        """Fraction of the budget spent; None without a budget."""
        percent = used_percent(self.total, self.budget)
        return None if percent is None else percent / 100


@dataclass(frozen=True)
class JobCost:
    """One job's share of the period: its money (a running attempt so far) and GPU-hours."""

    id: str
    name: str
    team: str
    owner: str
    status: str                    # UserStatus, as people read it
    gpus: int
    gpu_hours: float
    cost: float
    gpu_util: float | None         # mean utilisation (%), where measured


@dataclass(frozen=True)
class CostReport:
    period: str
    current: bool                  # the period running now (its figures still grow)
    teams: list[TeamCost]
    gpu_hours: dict[str, float] = field(default_factory=dict)   # per team; empty when not asked for
    jobs: list[JobCost] = field(default_factory=list)           # the costliest first, when asked for

    @property
    def total(self) -> float:
        return sum(t.total for t in self.teams)


def check_period(period: str, now: float) -> str:
    """The calendar month `period` names, from 1970-01 to the month a year after `now`
    (the times `gqa history` and `gqa report` take: gqa.models.times)."""
    match = PERIOD_RE.match(period.strip())
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise SpecError(f"invalid period {period!r}: use a calendar month, e.g. 2026-11")
    first, last = period_of(EARLIEST), period_of(now + AHEAD)
    if not first <= match.group(0) <= last:
        raise SpecError(f"period {match.group(0)!r} is outside {first} to {last} (1970 to a year from now): "
                        "give a month in between")
    return match.group(0)


def period_bounds(period: str) -> tuple[float, float]:
    """[start, end) of a calendar month (UTC) in epoch seconds."""
    year, month = int(period[:4]), int(period[5:7])
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
    return start.timestamp(), end.timestamp()


class CostService:
    """`history`: where the jobs that ran are read, for GPU-hours and the
    costliest jobs; a service without it answers spend only."""

    def __init__(self, store: SchedulingInputs, clock: Clock, history: HistoryReads | None = None):
        self.store, self.clock, self.history = store, clock, history

    def report(self, *, period: str | None = None, team: str | None = None, gpu_hours: bool = False,
               jobs: int = 0) -> CostReport:
        """Every team with spend, a budget or (with `gpu_hours`) GPU-hours in
        the period (the current month by default), or only `team`; with
        `jobs`, that many of the costliest jobs."""
        if jobs < 0 or jobs > MOST_JOBS:
            raise SpecError(f"jobs: from 0 to {MOST_JOBS} of the costliest jobs, got {jobs}")
        now = self.clock.now()
        current = period_of(now)
        period = check_period(period, now) if period else current
        settled = self.store.spend(period)
        running: dict[str, float] = {}
        if period == current:
            inventory = self.store.inventory()
            _, live = self.store.scheduling_view()
            running = running_cost(live, inventory.gpus if inventory else (), now)
        teams = self.store.teams()
        default = self.store.policy().default_team
        hours: dict[str, float] = {}
        costliest: list[JobCost] = []
        if (gpu_hours or jobs) and self.history is not None:
            hours, costliest = self._ran(self.history, period, period == current, team, now)
        names = set(settled) | set(running) | set(hours) | {t for t, p in teams.items() if p.budget is not None}
        if team is not None:
            names = {team}
        rows = [TeamCost(name, settled.get(name, 0.0), running.get(name, 0.0), teams.get(name, default).budget)
                for name in sorted(names)]
        if gpu_hours:
            hours = {name: hours.get(name, 0.0) for name in sorted(names)}
        else:
            hours = {}
        costliest.sort(key=lambda j: (-j.cost, -j.gpu_hours))   # ties: running first, then the latest end
        return CostReport(period, period == current, rows, hours, costliest[:jobs])

    def _ran(self, history: HistoryReads, period: str, current: bool, team: str | None,
             now: float) -> tuple[dict[str, float], list[JobCost]]:
        """GPU-hours per team and every job's share, over the attempts that ended in the period
        (and, for the current one, those running now)."""
        since, until = period_bounds(period)
        # every job that has run, in any state, from the period's start to now: a finished job's end
        # may come after the period its earlier attempts ran in, as the ledger charges them
        query = HistoryQuery(since=since, team=team, states=HISTORY_STATES, limit=PAGE)
        inventory = self.store.inventory() if current else None
        hours: dict[str, float] = {}
        out: list[JobCost] = []
        after: str | None = None
        while True:
            page, after = history.history(query, after)
            for job in page:
                rate = hourly_rate(job, inventory) if current and job.state == JobState.RUNNING else 0.0
                shared = _share(job, since, until, now if current else None, rate)
                if shared.gpu_hours == 0 and shared.cost == 0:
                    continue      # it held no GPU in the period: nothing to show
                hours[job.team] = hours.get(job.team, 0.0) + shared.gpu_hours
                out.append(shared)
            if after is None:
                return hours, out


def _share(job: JobRecord, since: float, until: float, now: float | None, rate: float) -> JobCost:
    """The job's money and GPU-hours in [since, until): its settled attempts that ended there and,
    with `now` (the current period), the attempt running now, to `now` at its GPUs' price."""
    part = settled_part(job, since, until)
    running, spent = so_far(job, now, hourly=rate) if now is not None else (0.0, 0.0)
    return JobCost(job.id, job.name, job.team, job.owner, job.status.value, job.gpus,
                   (job.gpu_seconds * part + running) / 3600, job.cost * part + spent, job.gpu_util)


def settled_part(job: JobRecord, since: float, until: float) -> float:
    """The part of the job's settled GPU time and money (its record's sums) that its attempts
    ending in [since, until) account for: each ended run (RUNNING to the transition after it) by
    its length, as the ledger charges the attempt when it ends. A record without ended runs in its
    transitions counts whole where its end (else its last start) falls in the period."""
    runs = _ended_runs(job)
    ran = sum(end - start for start, end in runs)
    if ran > 0:
        return sum(end - start for start, end in runs if since <= end < until) / ran
    at = job.ended_at if job.ended_at is not None else job.started_at
    return 1.0 if at is not None and since <= at < until else 0.0


def _ended_runs(job: JobRecord) -> list[tuple[float, float]]:
    """(start, end) of each attempt that has ended: RUNNING to the transition after it."""
    runs: list[tuple[float, float]] = []
    began: float | None = None
    for t in job.history:
        if began is not None:
            runs.append((began, max(began, t.at)))
            began = None
        if t.state == JobState.RUNNING:
            began = t.at
    return runs
