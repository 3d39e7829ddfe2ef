"""Team quotas: fair-share weight and GPU caps, and who is in each team."""

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..models.deployment_shapes import ARN_PATTERN_RE, NAME_PATTERN_RE
from ..models.errors import Conflict, SpecError
from ..models.limits import MAX_AMOUNT, MAX_DURATION, MAX_GPU_COUNT
from ..models.spec import NAME_RE
from ..ports import SchedulingInputs, Waker
from ..scheduling.horizon import backfill_by_choice
from ..scheduling.snapshot import Policy, TeamPolicy

NO_CAP = -1
WRITE_TRIES = 5   # a change that lost to another one between its read and its write is applied again on top
GROUP_RE = re.compile(r"^@[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$")   # a Unix group (local backend)
MAX_MEMBERS = 1000     # patterns per team: one with * covers many


@dataclass(frozen=True)
class TeamQuota:
    team: str
    policy: TeamPolicy
    gpus_in_use: int
    configured: bool               # False: the team runs on the queue's default policy
    members: tuple[str, ...] = ()  # who may submit for it (services.access.team_for)


@dataclass(frozen=True)
class QuotaView:
    teams: list[TeamQuota]
    policy: Policy


class QuotaService:
    def __init__(self, store: SchedulingInputs, waker: Waker | None = None):
        """`waker`: told of each change of a team's quota or the policy, so the dispatcher's next
        pass runs now: a raised budget or cap releases and starts held jobs at once, not at the
        next tick (a daemon answering the change itself passes after it anyway)."""
        self.store, self.waker = store, waker

    def show(self) -> QuotaView:
        """Every configured team, and every team holding GPUs now, with its caps."""
        teams = self.store.teams()
        _, running = self.store.scheduling_view()
        policy = self.store.policy()
        held: dict[str, int] = {}
        for r in running:
            held[r.team] = held.get(r.team, 0) + len(r.gpus)
        members = self.store.team_members()
        rows = [TeamQuota(t, teams.get(t, policy.default_team), held.get(t, 0), t in teams, members.get(t, ()))
                for t in sorted(set(teams) | set(held))]
        return QuotaView(rows, policy)

    def policy(self) -> Policy:
        return self.store.policy()

    def set(self, team: str, *, share: float | None = None, max_gpus: int | None = None,
            max_gpus_per_user: int | None = None, budget: float | None = None,
            stop_at_budget: bool | None = None) -> TeamPolicy:
        """Change what is given; NO_CAP (-1) removes a cap. What is not given stays as it
        is stored when the change is written, another change made meanwhile included."""
        _check_team(team, share=share, max_gpus=max_gpus, max_gpus_per_user=max_gpus_per_user, budget=budget)
        given = _given(share=share, max_gpus=max_gpus, max_gpus_per_user=max_gpus_per_user,
                       budget=budget, stop_at_budget=stop_at_budget)
        for _ in range(WRITE_TRIES):
            stored, revision = self.store.current_team(team)
            policy = replace(stored if stored is not None else self.store.policy().default_team, **given)
            try:
                self.store.set_team(team, policy, revision=revision)
                self._wake()
                return policy
            except Conflict:
                continue   # another change came between the read and the write: ours again, on top of it
        raise Conflict(f"team {team}'s quota kept changing while being set; try again")

    def set_members(self, team: str, members: Iterable[str]) -> tuple[str, ...]:
        """Replace who may submit for `team` (the entry point checks the caller
        is an admin): user names and IAM ARN patterns (shell-style *), and
        `@group` for a Unix group; none: only admins may."""
        if not NAME_RE.match(team):
            raise SpecError(f"{team!r} is not a valid team name")
        listed = tuple(dict.fromkeys(m.strip() for m in members if m.strip()))   # once each, in order
        problem = members_problem(listed)
        if problem:
            raise SpecError(problem)
        self.store.set_team_members(team, listed)
        return listed

    def set_policy(self, *, max_gpus_per_job: int | None = None, max_wall_time: float | None = None,
                   half_life: float | None = None, fair_share_weight: float | None = None,
                   age_weight: float | None = None, duration_weight: float | None = None,
                   preempt_tiers: tuple[int, ...] | None = None,
                   approval_gpus: int | None = None, approval_gpu_hours: float | None = None,
                   approval_cost: float | None = None, alert_pending_after: float | None = None,
                   budget_alerts: tuple[float, ...] | None = None, idle_gpu_percent: float | None = None,
                   idle_gpu_window: float | None = None, slice_tiers: tuple[int, ...] | None = None,
                   slice_after: float | None = None, slice_min_run: float | None = None,
                   slice_starve: float | None = None, backfill_by: str | None = None):
        """Change the queue-wide limits and priority weights that are given; NO_CAP removes a limit
        (for alert_pending_after: no pending alerts; for idle_gpu_window: no idle alerts).
        `backfill_by`: "limits" or "predictions" (scheduling/horizon.py)."""
        _check_policy(max_gpus_per_job=max_gpus_per_job, max_wall_time=max_wall_time, half_life=half_life,
                      fair_share_weight=fair_share_weight, age_weight=age_weight,
                      duration_weight=duration_weight, preempt_tiers=preempt_tiers,
                      approval_gpus=approval_gpus, approval_gpu_hours=approval_gpu_hours, approval_cost=approval_cost,
                      alert_pending_after=alert_pending_after, budget_alerts=budget_alerts,
                      idle_gpu_percent=idle_gpu_percent, idle_gpu_window=idle_gpu_window,
                      slice_tiers=slice_tiers, slice_after=slice_after, slice_min_run=slice_min_run,
                      slice_starve=slice_starve, backfill_by=backfill_by)
        changes = _given(max_gpus_per_job=max_gpus_per_job, max_wall_time=max_wall_time, half_life=half_life,
                         approval_gpus=approval_gpus, approval_gpu_hours=approval_gpu_hours,
                         approval_cost=approval_cost, alert_pending_after=alert_pending_after,
                         idle_gpu_percent=idle_gpu_percent, slice_after=slice_after,
                         slice_min_run=slice_min_run, slice_starve=slice_starve, backfill_by=backfill_by)
        if idle_gpu_window is not None:   # the policy keeps "never" as a zero window, not None
            changes["idle_gpu_window"] = 0.0 if idle_gpu_window == NO_CAP else idle_gpu_window
        for name, values in (("budget_alerts", budget_alerts), ("preempt_tiers", preempt_tiers),
                             ("slice_tiers", slice_tiers)):
            if values is not None:
                changes[name] = tuple(sorted(set(values)))
        weights = _given(fair_share=fair_share_weight, age=age_weight, duration=duration_weight)
        for _ in range(WRITE_TRIES):   # as set(): what is not given stays as stored when written
            stored, revision = self.store.current_policy()
            policy = replace(stored, **changes)
            if weights:
                policy = replace(policy, weights=replace(stored.weights, **weights))
            try:
                self.store.set_policy(policy, revision=revision)
                self._wake()
                return policy
            except Conflict:
                continue
        raise Conflict("the queue policy kept changing while being set; try again")

    def _wake(self) -> None:
        if self.waker is not None:
            self.waker.wake()


def members_problem(members: tuple[str, ...] | list[str]) -> str | None:
    """Why a team's member list cannot be stored; None if it can."""
    for member in members:
        if not (GROUP_RE if member.startswith("@") else ARN_PATTERN_RE if member.startswith("arn:")
                else NAME_PATTERN_RE).match(member):
            return (f"{member!r} is not a member: name a user (alice), an IAM ARN pattern "
                    "(arn:aws:iam::123456789012:user/alice, * allowed) or a Unix group (@ml)")
    if len(members) > MAX_MEMBERS:
        return f"{len(members)} members; a team lists at most {MAX_MEMBERS} (a pattern with * or a group covers many)"
    return None


def wire_members(body) -> list[str]:
    """`PUT /quota/teams/{team}/members`'s body, {"members": [...]}; SpecError if malformed."""
    members = body.get("members") if isinstance(body, dict) and set(body) == {"members"} else None
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise SpecError('the request body must be {"members": ["alice", "@ml", ...]}')
    return members


# Settings where -1 (NO_CAP) means "none": stored as None.
_CAPPED = frozenset({"max_gpus", "max_gpus_per_user", "budget", "max_gpus_per_job", "max_wall_time",
                     "approval_gpus", "approval_gpu_hours", "approval_cost", "alert_pending_after"})


def _given(**values) -> dict:
    """The values a caller gave (not None), with NO_CAP turned into None where it removes a cap."""
    return {name: None if name in _CAPPED and value == NO_CAP else value
            for name, value in values.items() if value is not None}


# The same rules whoever asks (the CLI checks its flags first, with their names;
# an API request reaches only these).
def _check_finite(values: dict) -> None:
    """NaN passes every `< 0` test, and infinity is no cap written the wrong way: a score or a sum
    that reads either is meaningless, so no setting may be one."""
    for name, value in values.items():
        numbers = value if isinstance(value, tuple) else (value,)
        if any(isinstance(v, float) and not math.isfinite(v) for v in numbers):
            raise SpecError(f"{name} must be a finite number, got {value}")


# the largest each setting may be (a typing mistake past these would overflow a database integer)
_GPUS, _AMOUNTS = (MAX_GPU_COUNT, " GPUs"), (MAX_AMOUNT, "")
_SECONDS = (MAX_DURATION, " seconds (100 years)")
_MOST = {"share": _AMOUNTS, "max_gpus": _GPUS, "max_gpus_per_user": _GPUS, "budget": _AMOUNTS,
         "max_gpus_per_job": _GPUS, "approval_gpus": _GPUS, "approval_gpu_hours": _AMOUNTS, "approval_cost": _AMOUNTS,
         "max_wall_time": _SECONDS, "half_life": _SECONDS, "alert_pending_after": _SECONDS,
         "idle_gpu_window": _SECONDS, "slice_after": (MAX_AMOUNT * 3600, " GPU-seconds"), "slice_min_run": _SECONDS,
         "slice_starve": _SECONDS, "fair_share_weight": _AMOUNTS, "age_weight": _AMOUNTS, "duration_weight": _AMOUNTS}


def _check_most(values: dict) -> None:
    for name, value in values.items():
        most, unit = _MOST.get(name, (None, ""))
        if most is not None and isinstance(value, (int, float)) and value > most:
            raise SpecError(f"{name} must be at most {most:,}{unit}; got {value:,}")


def _check_team(team: str, *, share, max_gpus, max_gpus_per_user, budget) -> None:
    if not NAME_RE.match(team):
        raise SpecError(f"{team!r} is not a valid team name")
    _check_finite({"share": share, "budget": budget})
    _check_most({"share": share, "max_gpus": max_gpus, "max_gpus_per_user": max_gpus_per_user, "budget": budget})
    if share is not None and share <= 0:
        raise SpecError(f"share must be positive, got {share:g}")
    for name, value in (("max_gpus", max_gpus), ("max_gpus_per_user", max_gpus_per_user)):
        if value is not None and value < NO_CAP:
            raise SpecError(f"{name} must be a GPU count, or -1 for no cap; got {value}")
    if budget is not None and budget < 0 and budget != NO_CAP:
        raise SpecError(f"budget must be an amount >= 0, or -1 for no budget; got {budget:g}")


def _check_policy(**values) -> None:
    _check_finite(values)
    _check_most(values)
    if values["backfill_by"] is not None:
        try:
            backfill_by_choice(values["backfill_by"])
        except ValueError as exc:
            raise SpecError(str(exc)) from None
    gpus = values["max_gpus_per_job"]
    if gpus is not None and (gpus == 0 or gpus < NO_CAP):
        raise SpecError(f"max_gpus_per_job must be a GPU count, or -1 for no limit; got {gpus}")
    wall = values["max_wall_time"]
    if wall is not None and wall <= 0 and wall != NO_CAP:
        raise SpecError(f"max_wall_time must be positive, or -1 for no limit; got {wall:g}")
    if values["half_life"] is not None and values["half_life"] <= 0:
        raise SpecError(f"half_life must be positive, got {values['half_life']:g}")
    for name in ("fair_share_weight", "age_weight", "duration_weight", "slice_min_run", "slice_starve"):
        if values[name] is not None and values[name] < 0:
            raise SpecError(f"{name} must be >= 0, got {values[name]:g}")
    tiers = values["preempt_tiers"]
    if tiers is not None and not set(tiers) <= {1, 2}:
        raise SpecError(f"preempt_tiers takes 1 (normal) and/or 2 (low), got {list(tiers)}")
    sliced = values["slice_tiers"]
    if sliced is not None and not set(sliced) <= {0, 1, 2}:
        raise SpecError(f"slice_tiers takes 0 (high), 1 (normal) and/or 2 (low), got {list(sliced)}")
    if values["slice_after"] is not None and values["slice_after"] <= 0:
        raise SpecError(f"slice_after must be positive GPU-seconds, got {values['slice_after']:g}")
    for name in ("approval_gpus", "approval_gpu_hours", "approval_cost"):
        if values[name] is not None and values[name] < 0 and values[name] != NO_CAP:
            raise SpecError(f"{name} must be >= 0, or -1 for no threshold; got {values[name]:g}")
    for name in ("alert_pending_after", "idle_gpu_window"):
        if values[name] is not None and values[name] <= 0 and values[name] != NO_CAP:
            raise SpecError(f"{name} must be positive, or -1 for never; got {values[name]:g}")
    if values["idle_gpu_percent"] is not None and not 0 <= values["idle_gpu_percent"] <= 100:
        raise SpecError(f"idle_gpu_percent must be from 0 to 100, got {values['idle_gpu_percent']:g}")
    if values["budget_alerts"] is not None and not all(t > 0 for t in values["budget_alerts"]):
        raise SpecError(f"budget_alerts are percentages of the budget above 0, got {list(values['budget_alerts'])}")
