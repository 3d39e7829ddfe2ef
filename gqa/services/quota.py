"""Team quotas: fair-share weight and GPU caps."""

from dataclasses import replace

from ..ports import JobStore
from ..scheduling.snapshot import TeamPolicy

NO_CAP = -1


class QuotaService:
    def __init__(self, store: JobStore):
        self.store = store

    def set(self, team: str, *, share: float | None = None, max_gpus: int | None = None,
            max_gpus_per_user: int | None = None, budget: float | None = None,
            stop_at_budget: bool | None = None) -> TeamPolicy:
        """Change what is given; NO_CAP (-1) removes a cap."""
        current = self.store.teams().get(team, self.store.policy().default_team)
        changes = {}
        if share is not None:
            changes["share"] = share
        if max_gpus is not None:
            changes["max_gpus"] = None if max_gpus == NO_CAP else max_gpus
        if max_gpus_per_user is not None:
            changes["max_gpus_per_user"] = None if max_gpus_per_user == NO_CAP else max_gpus_per_user
        if budget is not None:
            changes["budget"] = None if budget == NO_CAP else budget
        if stop_at_budget is not None:
            changes["stop_at_budget"] = stop_at_budget
        policy = replace(current, **changes)
        self.store.set_team(team, policy)
        return policy

    def set_policy(self, *, max_gpus_per_job: int | None = None, max_wall_time: float | None = None,
                   half_life: float | None = None, fair_share_weight: float | None = None,
                   age_weight: float | None = None, preempt_tiers: tuple[int, ...] | None = None,
                   approval_gpus: int | None = None, approval_gpu_hours: float | None = None,
                   approval_cost: float | None = None, alert_pending_after: float | None = None,
                   budget_alerts: tuple[float, ...] | None = None, idle_gpu_percent: float | None = None,
                   idle_gpu_window: float | None = None):
        """Change the queue-wide limits and priority weights that are given; NO_CAP removes a limit
        (for alert_pending_after: no pending alerts; for idle_gpu_window: no idle alerts)."""
        policy = self.store.policy()
        changes: dict = {}
        if max_gpus_per_job is not None:
            changes["max_gpus_per_job"] = None if max_gpus_per_job == NO_CAP else max_gpus_per_job
        if max_wall_time is not None:
            changes["max_wall_time"] = None if max_wall_time == NO_CAP else max_wall_time
        if half_life is not None:
            changes["half_life"] = half_life
        for name, value in (("approval_gpus", approval_gpus), ("approval_gpu_hours", approval_gpu_hours),
                            ("approval_cost", approval_cost)):
            if value is not None:
                changes[name] = None if value == NO_CAP else value
        if alert_pending_after is not None:
            changes["alert_pending_after"] = None if alert_pending_after == NO_CAP else alert_pending_after
        if budget_alerts is not None:
            changes["budget_alerts"] = tuple(sorted(set(budget_alerts)))
        if idle_gpu_percent is not None:
            changes["idle_gpu_percent"] = idle_gpu_percent
        if idle_gpu_window is not None:
            changes["idle_gpu_window"] = 0.0 if idle_gpu_window == NO_CAP else idle_gpu_window
        if preempt_tiers is not None:
            changes["preempt_tiers"] = tuple(sorted(set(preempt_tiers)))
        weights = {}
        if fair_share_weight is not None:
            weights["fair_share"] = fair_share_weight
        if age_weight is not None:
            weights["age"] = age_weight
        if weights:
            changes["weights"] = replace(policy.weights, **weights)
        policy = replace(policy, **changes)
        self.store.set_policy(policy)
        return policy
