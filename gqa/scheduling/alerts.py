"""The budget watch's rules: spend against budgets, alerts, holds and stops.

Pure: the caller reads spend, jobs and GPU utilisation and passes `now`;
these functions say what to do about them. Every alert has a key that is
claimed once (the service does that through a conditional write):

    budget#<period>#<team>#<threshold>   once per team, threshold and period
    pending#<job>                        once per job
    idle#<job>#<attempt>                 once per attempt of a job

When spend jumps over several thresholds between two looks, one alert names
the highest; the lower ones are not sent afterwards (an alert is redundant
once a higher threshold of the same team and period went out, see
`Alert.covered_by`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..models.units import format_duration
from .budget import BudgetLedger, TeamSpend, money, percent_text, spent_text
from .snapshot import Snapshot, TeamPolicy

BUDGET, PENDING, IDLE = "budget", "pending", "idle"


@dataclass(frozen=True)
class Alert:
    key: str                             # claimed exactly once
    kind: str                            # budget | pending | idle | approval (an SNS attribute to filter on)
    subject: str
    message: str
    team: str | None = None
    job_id: str | None = None
    covered_by: tuple[str, ...] = ()     # keys any of which, already sent, make this alert redundant

    def __post_init__(self) -> None:
        if self.key not in self.covered_by:
            object.__setattr__(self, "covered_by", (self.key, *self.covered_by))


@dataclass(frozen=True)
class Waiting:
    """A job waiting in the queue, and since when (the start of its current wait)."""

    id: str
    team: str
    name: str
    since: float
    reason: str = ""


@dataclass(frozen=True)
class Attempt:
    """A running attempt of a job."""

    id: str
    team: str
    name: str
    attempt: int
    started_at: float
    gpus: int
    requested: bool = False      # a cancel or requeue is already asked of it


def team_spend(settled: Mapping[str, float], running: Mapping[str, float], teams: Mapping[str, TeamPolicy],
               default: TeamPolicy) -> dict[str, TeamSpend]:
    """Every team that spent or has a budget of its own, with its budget."""
    names = set(settled) | set(running) | {t for t, p in teams.items() if p.budget is not None}
    return {t: TeamSpend(t, settled.get(t, 0.0), running.get(t, 0.0), teams.get(t, default).budget)
            for t in sorted(names)}


# -- alerts -----------------------------------------------------------------------------------------

def budget_key(period: str, team: str, threshold: float) -> str:
    return f"budget#{period}#{team}#{threshold:g}"


def budget_alerts(spend: Mapping[str, TeamSpend], thresholds: Iterable[float], period: str) -> list[Alert]:
    """Per team, the highest threshold its spend has reached this period."""
    levels = sorted(set(thresholds))
    out = []
    for team, s in sorted(spend.items()):
        reached = [t for t in levels if s.budget is not None and s.spent > 0 and s.percent >= t]
        if not reached:
            continue
        top = reached[-1]
        higher = tuple(budget_key(period, team, t) for t in levels if t > top)
        action = " Its queue is held until the budget is raised or the month ends." if s.exhausted else ""
        out.append(Alert(
            budget_key(period, team, top), BUDGET,
            f"gqa: team {team} at {percent_text(s.percent)} of its {period} budget",
            f"{spent_text(s)}: {money(s.settled)} by finished attempts, {money(s.running)} by running jobs "
            f"so far. Alert threshold {top:g}%.{action}",
            team=team, covered_by=higher))
    return out


def pending_key(job_id: str) -> str:
    return f"pending#{job_id}"


def pending_alerts(waiting: Iterable[Waiting], now: float, after: float | None) -> list[Alert]:
    """Jobs that have waited longer than `after` (None: no such alerts)."""
    if after is None:
        return []
    out = []
    for job in waiting:
        waited = now - job.since
        if waited < after:
            continue
        why = f": {job.reason}" if job.reason else ""
        out.append(Alert(
            pending_key(job.id), PENDING, f"gqa: job {job.id} waiting for {format_duration(waited)}",
            f"job {job.id} ({job.name}, team {job.team}) has waited {format_duration(waited)}, longer than "
            f"{format_duration(after)}{why}", team=job.team, job_id=job.id))
    return out


def idle_key(job_id: str, attempt: int) -> str:
    return f"idle#{job_id}#{attempt}"


def idle_candidates(attempts: Iterable[Attempt], now: float, window: float) -> list[Attempt]:
    """Attempts running for at least the window: the ones whose utilisation is worth asking for."""
    if window <= 0:
        return []
    return [a for a in attempts if now - a.started_at >= window]


def idle_alerts(attempts: Iterable[Attempt], utilisation: Mapping[str, float], now: float, *,
                below: float, window: float) -> list[Alert]:
    """Attempts whose GPUs averaged under `below` % over the last `window`
    seconds. A job with no utilisation figure is never called idle: no data
    is not the same as an idle GPU."""
    out = []
    for a in idle_candidates(attempts, now, window):
        used = utilisation.get(a.id)
        if used is None or used >= below:
            continue
        out.append(Alert(
            idle_key(a.id, a.attempt), IDLE, f"gqa: job {a.id} GPUs idle ({used:.1f}%)",
            f"job {a.id} ({a.name}, team {a.team}, attempt {a.attempt}) holds {a.gpus} GPU"
            f"{'s' if a.gpus != 1 else ''} averaging {used:.1f}% utilisation over the last "
            f"{format_duration(window)} (alert under {below:g}%); it has run {format_duration(now - a.started_at)}",
            team=a.team, job_id=a.id))
    return out


def unsent(alerts: Iterable[Alert], sent: set[str] | frozenset[str]) -> list[Alert]:
    """The alerts none of whose covering keys went out already."""
    return [a for a in alerts if not any(k in sent for k in a.covered_by)]


# -- holds, releases, stops -------------------------------------------------------------------------

@dataclass(frozen=True)
class QueueChanges:
    hold: dict[str, str]         # queued job -> why it is held (with the numbers)
    release: list[str]           # held jobs the budget allows again
    stop: dict[str, str]         # running job -> why it is requeued


def queue_changes(snap: Snapshot, spend: Mapping[str, TeamSpend], attempts: Iterable[Attempt]) -> QueueChanges:
    """A team at or over its budget has its queued jobs HELD and, if its policy
    says stop_at_budget, its running jobs requeued (they checkpoint and wait,
    held). A held job is released only when the scheduling pass would not hold
    it again (budget.py: spend, running commitments and its own cap fit), so the
    watch and the dispatcher never undo each other."""
    exhausted = {t: spent_text(s) for t, s in spend.items() if s.exhausted}
    ledger = BudgetLedger(snap)
    hold, release = {}, []
    for job in snap.pending:
        if job.user_hold:
            continue   # its owner's: only `gqa release` frees it
        if job.held:
            if job.team not in exhausted and ledger.over(job) is None:
                ledger.started(job)   # as the pass counts a release: only what the budget could start
                release.append(job.id)
        elif job.team in exhausted:
            hold[job.id] = exhausted[job.team]
    stop = {a.id: f"{exhausted[a.team]}; requeued by its team's stop-at-budget policy"
            for a in attempts if a.team in exhausted and not a.requested and snap.team(a.team).stop_at_budget}
    return QueueChanges(hold, release, stop)
