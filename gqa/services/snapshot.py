"""Read the scheduler's snapshot from a store, with expected run times
(wall time scaled by what each team's past jobs used of theirs)."""

from collections import defaultdict
from dataclasses import replace

from ..ports import JobStore
from ..scheduling import Snapshot
from ..scheduling.eta import expected_runtime, runtime_ratio


def team_ratios(store: JobStore) -> dict[str, float]:
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for team, actual, limit in store.runtime_samples():
        samples[team].append((actual, limit))
    return {team: runtime_ratio(s) for team, s in samples.items()}


def read_snapshot(store: JobStore, now: float, ratios: dict[str, float] | None = None) -> Snapshot:
    inventory = store.inventory()
    policy = store.policy()
    ratios = team_ratios(store) if ratios is None else ratios
    pending, running = store.scheduling_view()
    pending = [replace(j, expected_runtime=expected_runtime(j.wall_time, ratios.get(j.team, 1.0))) for j in pending]
    running = [replace(r, expected_runtime=expected_runtime(r.wall_time, ratios.get(r.team, 1.0))) for r in running]
    return Snapshot(now=now, gpus=inventory.gpus if inventory else (), pending=tuple(pending),
                    running=tuple(running), teams=store.teams(), usage=store.usage(now, policy.half_life),
                    policy=policy, cpus=inventory.cpus if inventory else None,
                    memory=inventory.memory if inventory else None)
