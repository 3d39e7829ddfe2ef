"""Budgets and approvals: money and size rules, with the arithmetic shown.

A job starts only if its team's spend this period, plus what its running jobs
may still cost (to their wall-time limits), plus this job's cap fits the
team's budget. A job's cap is its GPU-hours (GPUs x wall time, or its
max_gpu_hours if smaller) at the price of the GPUs it could run on.
A team whose spend has reached its budget has its whole queue held, whatever
the jobs would cost (alerts.py: the budget watch holds it between passes)."""

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from .inventory import tables
from .snapshot import Gpu, PendingJob, Policy, RunningJob, Snapshot

INF = float("inf")


def period_of(ts: float) -> str:
    """The budget period (calendar month, UTC) a time falls in: '2026-11'."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m")


def gpu_hours_cap(gpus: int, wall_time: float | None, max_gpu_hours: float | None) -> float:
    """GPU-hours a job may use at most (0 for a CPU-only job, which costs nothing here)."""
    if gpus == 0:
        return 0.0
    by_wall = gpus * wall_time / 3600 if wall_time else INF
    return min(by_wall, max_gpu_hours if max_gpu_hours else INF)


def price_for(gpu_type: str | None, inventory: tuple[Gpu, ...], types: tuple[str, ...] | None = None) -> float:
    """The dearest GPU the job could land on: caps are upper bounds."""
    types = types if types is not None else (tuple(gpu_type.split(",")) if gpu_type else None)
    return max((g.price for g in inventory if types is None or g.type in types), default=0.0)


def gpus_rate(held: Iterable[int], price: Mapping[int, float]) -> float:
    """What an hour of the GPUs `held` costs, `price` being the inventory's price per GPU.

    A GPU the inventory no longer lists (a daemon restarted with fewer GPUs adopts the
    jobs still running on the others) costs while its job runs on it. Its own price went
    with the old inventory, so it is priced as the queue would price it now: as the job's
    GPUs still listed, since a gang never spans two pools (the same type), else as the
    dearest GPU listed, as a budget's cap counts the GPUs of a job that asks for no type.
    Settlement, `gqa cost`, budgets and their stop all price through here, so they agree."""
    rate, gone, sibling = 0.0, 0, None
    for i in held:
        p = price.get(i)
        if p is None:
            gone += 1
        else:
            rate += p
            sibling = p if sibling is None else max(sibling, p)
    if not gone:
        return rate
    return rate + gone * (sibling if sibling is not None else max(price.values(), default=0.0))


def running_cost(running: Iterable[RunningJob], gpus: Iterable[Gpu], now: float) -> dict[str, float]:
    """What each team's running attempts have cost from their start until now.
    An attempt not started yet (STARTING) has cost nothing."""
    price = {g.index: g.price for g in gpus}
    out: dict[str, float] = {}
    for run in running:
        if not run.started:
            continue
        rate = gpus_rate(run.gpus, price)
        if rate:
            out[run.team] = out.get(run.team, 0.0) + rate * max(0.0, now - run.started_at) / 3600
    return out


def money(amount: float) -> str:
    return "unbounded" if amount == INF else f"${amount:,.2f}"


@dataclass(frozen=True)
class TeamSpend:
    """A team's spend this period: settled attempts plus what running ones have cost so far."""

    team: str
    settled: float
    running: float
    budget: float | None = None

    @property
    def spent(self) -> float:
        return self.settled + self.running

    @property
    def percent(self) -> float:
        """Spend as a percentage of the budget (`used_percent`; 0 without one)."""
        return used_percent(self.spent, self.budget) or 0.0

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.spent > 0 and self.percent >= 100.0


def used_percent(spent: float, budget: float | None) -> float | None:
    """Spend as a percentage of a budget; None without one. A budget of 0 is 0% used
    until anything is spent, and past 100% (inf) by any spend at all: nothing spent has
    reached it (no alert, no hold of the whole queue), though it lets no priced job start."""
    if budget is None:
        return None
    if budget <= 0:
        return math.inf if spent > 0 else 0.0
    return 100.0 * spent / budget


def percent_text(percent: float) -> str:
    """Whole percent, rounded down, so "100%" is only said once it is reached."""
    return "over 100%" if math.isinf(percent) else f"{math.floor(percent + 1e-9)}%"


def used_text(spent: float, budget: float | None) -> str:
    """How much of a budget is spent, as every view says it (`gqa cost`, `gqa top`, `gqa ui`,
    and a hold's reason in `gqa status`): "-" without a budget, else `percent_text`."""
    percent = used_percent(spent, budget)
    return "-" if percent is None else percent_text(percent)


def spent_text(spend: TeamSpend) -> str:
    """'team vision spent $1,012.00 of $1,000.00 this month (101%)'."""
    return (f"team {spend.team} spent {money(spend.spent)} of {money(spend.budget or 0.0)} this month "
            f"({percent_text(spend.percent)})")


def unbounded_cost(team: str, budget: float, gpus: int, wall_time: float | None, max_gpu_hours: float | None,
                   price: float) -> str | None:
    """Why a job submitted to a team with a budget can never start: with neither a wall time nor
    max_gpu_hours, priced GPUs make its cap unbounded, over any budget. None if its cost is bounded."""
    if not price or gpu_hours_cap(gpus, wall_time, max_gpu_hours) != INF:
        return None
    return f"team {team} has a budget ({money(budget)} a month): give the job a wall time (--time 4h) so its " \
           "cost can be bounded"


def approval_reasons(*, gpus: int, gpu_hours: float, cost: float, policy: Policy) -> list[str]:
    reasons = []
    if policy.approval_gpus is not None and gpus > policy.approval_gpus:
        reasons.append(f"asks for {gpus} GPUs (approval needed over {policy.approval_gpus})")
    if policy.approval_gpu_hours is not None and gpu_hours > policy.approval_gpu_hours:
        amount = "unbounded GPU-hours (no wall time or max_gpu_hours)" if gpu_hours == INF \
            else f"up to {gpu_hours:,.1f} GPU-hours"
        reasons.append(f"{amount} (approval needed over {policy.approval_gpu_hours:g})")
    if policy.approval_cost is not None and cost > policy.approval_cost:
        reasons.append(f"may cost {money(cost)} (approval needed over {money(policy.approval_cost)})")
    return reasons


class BudgetLedger:
    """Per pass: spend so far, what running jobs may still cost, and what jobs
    started in this pass commit."""

    def __init__(self, snap: Snapshot):
        self.snap = snap
        # with budgets in force every job must be looked at, even when no GPU is free: it may have to be HELD
        self.active = any(t.budget is not None for t in snap.teams.values()) or snap.policy.default_team.budget \
            is not None
        self.committed: dict[str, float] = defaultdict(float)
        if not self.active:
            return
        price = tables(snap.gpus).price
        for run in snap.running:
            # an attempt not started yet may still cost its whole wall time
            left = max(0.0, run.ends_by - snap.now) if run.started else (run.wall_time or INF)
            rate = gpus_rate(run.gpus, price)
            self.committed[run.team] += rate * left / 3600 if rate else 0.0

    def cap(self, job: PendingJob) -> float:
        rate = price_for(job.gpu_type, self.snap.gpus, job.types())
        hours = gpu_hours_cap(job.gpus, job.wall_time, job.max_gpu_hours)
        return rate * hours if rate else 0.0

    def over(self, job: PendingJob) -> str | None:
        budget = self.snap.team(job.team).budget
        if budget is None:
            return None
        spent = self.snap.spend.get(job.team, 0.0)
        used = TeamSpend(job.team, spent, 0.0, budget)
        if used.exhausted:   # the whole queue of a team at its budget waits, even jobs that cost nothing
            return spent_text(used)
        committed, cap = self.committed[job.team], self.cap(job)
        if cap == INF:   # no spend, however small, lets it start: its owner has to bound it
            return (f"team {job.team} has a budget ({money(budget)} a month) and this job has no wall time, so "
                    f"its cost has no bound: give it one (gqa update {job.id} --time 4h)")
        total = spent + committed + cap
        if total <= budget:
            return None
        return (f"team {job.team} budget: spent {money(spent)} + {money(committed)} its running jobs may still "
                f"cost + {money(cap)} for this job = {money(total)}, over {money(budget)} this period")

    def started(self, job: PendingJob) -> None:
        if self.active:
            self.committed[job.team] += self.cap(job)
