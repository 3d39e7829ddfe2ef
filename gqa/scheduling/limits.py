"""Hard limits checked when a job is submitted: a job over one of them could
never run here, so it is refused with the numbers instead of waiting forever."""

from collections import Counter

from ..models.units import format_count, format_duration
from .snapshot import Gpu, Policy


def hard_limit_problems(*, gpus: int, gpu_type: str | None, wall_time: float | None,
                        cpus: int | None, memory: int | None, inventory: tuple[Gpu, ...],
                        policy: Policy, total_cpus: int | None = None,
                        total_memory: int | None = None, team_max_gpus: int | None = None,
                        user_max_gpus: int | None = None,
                        team: str = "") -> list[str]:
    problems = []
    counts = Counter(g.type for g in inventory)
    types = gpu_type.split(",") if gpu_type else None
    have = max(counts.get(t, 0) for t in types) if types else len(inventory)
    if types and gpus and not any(t in counts for t in types):   # a CPU-only job's type asks for nothing
        kinds = ", ".join(f"{n} {t}" for t, n in sorted(counts.items())) or "no GPUs"
        problems.append(f"asks for {' or '.join(types)} GPUs; the queue has {kinds}")
    elif gpus > have:
        of = f"{' or '.join(types)} " if types else ""
        problems.append(f"asks for {format_count(gpus, of + 'GPU')}; the queue has {have}")
    if policy.max_gpus_per_job is not None and gpus > policy.max_gpus_per_job:
        problems.append(f"asks for {format_count(gpus, 'GPU')}; the limit per job is {policy.max_gpus_per_job}")
    if team_max_gpus is not None and gpus > team_max_gpus:
        problems.append(f"asks for {format_count(gpus, 'GPU')}; team {team} may hold at most {team_max_gpus}")
    if user_max_gpus is not None and gpus > user_max_gpus:
        problems.append(f"asks for {format_count(gpus, 'GPU')}; a user of team {team} may hold at most {user_max_gpus}")
    if policy.max_wall_time is not None and wall_time is not None and wall_time > policy.max_wall_time:
        problems.append(f"asks for {format_duration(wall_time)} wall time; "
                        f"the limit is {format_duration(policy.max_wall_time)}")
    if total_cpus is not None and cpus is not None and cpus > total_cpus:
        problems.append(f"asks for {cpus} CPUs; the queue has {total_cpus}")
    if total_memory is not None and memory is not None and memory > total_memory:
        from ..models.units import format_size
        problems.append(f"asks for {format_size(memory)} memory; the queue has {format_size(total_memory)}")
    return problems
