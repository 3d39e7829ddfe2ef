"""`gqa cost`: each team's spend in a budget period against its budget.

Spend is what finished attempts cost (the store's ledger) plus, for the
current period, what the attempts running now have cost so far, at the price
of the GPUs they hold: the same figure the scheduler checks budgets against."""

import re
from dataclasses import dataclass

from ..models.errors import SpecError
from ..ports import Clock, SchedulingInputs
from ..scheduling.budget import period_of
from ..scheduling.budget import running_cost

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
        if self.budget is None:
            return None
        return self.total / self.budget if self.budget > 0 else (0.0 if self.total == 0 else float("inf"))


@dataclass(frozen=True)
class CostReport:
    period: str
    current: bool                  # the period running now (its figures still grow)
    teams: list[TeamCost]

    @property
    def total(self) -> float:
        return sum(t.total for t in self.teams)


def check_period(period: str) -> str:
    match = PERIOD_RE.match(period.strip())
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise SpecError(f"invalid period {period!r}: use a calendar month, e.g. 2026-11")
    return period.strip()


class CostService:
    def __init__(self, store: SchedulingInputs, clock: Clock):
        self.store, self.clock = store, clock

    def report(self, *, period: str | None = None, team: str | None = None) -> CostReport:
        """Every team with spend or a budget in the period (the current month
        by default), or only `team`."""
        now = self.clock.now()
        current = period_of(now)
        period = check_period(period) if period else current
        settled = self.store.spend(period)
        running: dict[str, float] = {}
        if period == current:
            inventory = self.store.inventory()
            _, jobs = self.store.scheduling_view()
            running = running_cost(jobs, inventory.gpus if inventory else (), now)
        teams = self.store.teams()
        default = self.store.policy().default_team
        names = set(settled) | set(running) | {t for t, p in teams.items() if p.budget is not None}
        if team is not None:
            names = {team}
        rows = [TeamCost(name, settled.get(name, 0.0), running.get(name, 0.0), teams.get(name, default).budget)
                for name in sorted(names)]
        return CostReport(period, period == current, rows)
