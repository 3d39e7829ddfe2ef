"""What a deployment's configuration (gqa.models.deployment) sets in the
scheduler: the queue policy and the teams' quotas it starts with. Here, not
in the model, because the core's models do not depend on the scheduler."""

from __future__ import annotations

from ..models.deployment import Deployment
from ..scheduling.snapshot import Policy, TeamPolicy


def queue_policy(config: Deployment) -> Policy:
    """The queue policy the deployment starts with."""
    queue, approval = config.queue, config.approval
    return Policy(max_gpus_per_job=queue.max_gpus_per_job,
                  max_wall_time=None if queue.max_wall_time is None else float(queue.max_wall_time),
                  half_life=float(queue.half_life), approval_gpus=approval.gpus,
                  approval_gpu_hours=approval.gpu_hours, approval_cost=approval.cost,
                  preempt_tiers=config.tiers.preempt_ranks, slice_tiers=config.tiers.slice_ranks,
                  slice_after=float(config.tiers.slice_after))


def team_policies(config: Deployment) -> dict[str, TeamPolicy]:
    """Each configured team's share, caps and budget."""
    return {team.name: TeamPolicy(share=team.share, max_gpus=team.max_gpus, max_gpus_per_user=team.max_gpus_per_user,
                                  budget=team.budget, stop_at_budget=team.stop_at_budget)
            for team in config.teams}
