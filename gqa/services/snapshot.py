"""Read the scheduler's snapshot from a store, with expected run times
(wall time scaled by what each team's past jobs used of theirs)."""

from collections import defaultdict

from ..models.dependency import parse_dependency
from ..models.errors import SpecError
from ..models.job import JobState
from ..ports import SchedulingInputs
from ..scheduling import Snapshot
from ..scheduling.snapshot import PendingJob, with_changes
from ..scheduling.budget import period_of, running_cost
from ..scheduling.eta import expected_runtime, mean_share, runtime_ratio


def team_samples(store: SchedulingInputs) -> dict[str, list[tuple[float, float]]]:
    """Each team's (actual run time, wall-time limit) of its past runs."""
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for team, actual, limit in store.runtime_samples():
        samples[team].append((actual, limit))
    return samples


def team_ratios(samples: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Per team, the median share of its limits its runs use: the pass ranks by it."""
    return {team: runtime_ratio(s) for team, s in samples.items()}


def team_shares(samples: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Per team, the mean share of its limits its runs use: the ETA ends runs by it."""
    return {team: mean_share(s) for team, s in samples.items()}


def read_snapshot(store: SchedulingInputs, now: float, ratios: dict[str, float] | None = None,
                  view: tuple[list, list] | None = None) -> Snapshot:
    """`view`: the store's scheduling_view() when the caller has just read it."""
    inventory = store.inventory()
    policy = store.policy()
    ratios = team_ratios(team_samples(store)) if ratios is None else ratios
    pending, running = store.scheduling_view() if view is None else view
    pending = [with_changes(j, expected_runtime=expected_runtime(j.wall_time, ratios.get(j.team, 1.0)))
               for j in pending]
    # an attempt not started yet (STARTING) still carries its previous attempt's start: seen from now it
    # begins now, so backfill, ETAs and preemption give it its whole wall time ahead and nothing to lose
    running = [with_changes(r, expected_runtime=expected_runtime(r.wall_time, ratios.get(r.team, 1.0)),
                       started_at=r.started_at if r.started else now) for r in running]
    gpus = inventory.gpus if inventory else ()
    named = dependency_states(store, pending)
    return Snapshot(now=now, gpus=gpus, pending=tuple(pending),
                    running=tuple(running), teams=store.teams(), usage=store.usage(now, policy.half_life),
                    policy=policy, cpus=inventory.cpus if inventory else None,
                    memory=inventory.memory if inventory else None, spend=spend_now(store, running, gpus, now),
                    named=named)


def dependency_states(store: SchedulingInputs, pending: list[PendingJob]) -> dict[str, dict[JobState, int]]:
    """The states of the jobs the pending jobs' dependencies name (one narrow read; none without any)."""
    refs: dict[str, None] = {}
    for text in {job.dependency for job in pending if job.dependency}:   # an array's tasks share theirs
        try:
            refs.update(dict.fromkeys(parse_dependency(text).jobs))
        except SpecError:
            continue   # the pass says why it can never be met
    return store.states_of(refs) if refs else {}


def spend_now(store: SchedulingInputs, running, gpus, now: float) -> dict[str, float]:
    """This period's spend per team: settled attempts plus what running ones have cost so far."""
    spend = dict(store.spend(period_of(now)))
    for team, cost in running_cost(running, gpus, now).items():
        spend[team] = spend.get(team, 0.0) + cost
    return spend
