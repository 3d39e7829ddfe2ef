"""Team quotas: fair-share weight and GPU caps."""

from dataclasses import replace

from ..ports import JobStore
from ..scheduling.snapshot import TeamPolicy

NO_CAP = -1


class QuotaService:
    def __init__(self, store: JobStore):
        self.store = store

    def set(self, team: str, *, share: float | None = None, max_gpus: int | None = None,
            max_gpus_per_user: int | None = None) -> TeamPolicy:
        """Change what is given; NO_CAP (-1) removes a cap."""
        current = self.store.teams().get(team, self.store.policy().default_team)
        changes = {}
        if share is not None:
            changes["share"] = share
        if max_gpus is not None:
            changes["max_gpus"] = None if max_gpus == NO_CAP else max_gpus
        if max_gpus_per_user is not None:
            changes["max_gpus_per_user"] = None if max_gpus_per_user == NO_CAP else max_gpus_per_user
        policy = replace(current, **changes)
        self.store.set_team(team, policy)
        return policy
