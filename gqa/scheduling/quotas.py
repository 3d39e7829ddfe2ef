"""Phase 3 of a pass: quotas. A job over a cap waits without blocking others.
The caps count GPUs: a CPU-only job uses none of them (array limits still apply)."""

from .ledger import Ledger
from .snapshot import PendingJob, Snapshot


def over_quota(job: PendingJob, snap: Snapshot, ledger: Ledger) -> str | None:
    return (_over_gpu_caps(job, snap, ledger) if job.gpus else None) or _over_array_limit(job, ledger)


def _over_gpu_caps(job: PendingJob, snap: Snapshot, ledger: Ledger) -> str | None:
    team = snap.team(job.team)
    held = ledger.team.get(job.team, 0)
    if team.max_gpus is not None and held + job.gpus > team.max_gpus:
        return f"team {job.team} at {held} of {team.max_gpus} GPUs; needs {job.gpus} more"
    if team.max_gpus_per_user is not None:
        mine = ledger.user.get((job.team, job.user), 0)
        if mine + job.gpus > team.max_gpus_per_user:
            return (f"user {job.user} at {mine} of {team.max_gpus_per_user} GPUs allowed per user "
                    f"in team {job.team}; needs {job.gpus} more")
    return None


def _over_array_limit(job: PendingJob, ledger: Ledger) -> str | None:
    if job.group and job.group_limit is not None:
        running = ledger.group.get(job.group, 0)
        if running >= job.group_limit:
            return f"array {job.group} at {running} of {job.group_limit} tasks running at once"
    return None
