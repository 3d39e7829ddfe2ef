"""Tables derived from the GPU inventory, built once per inventory.

The inventory rarely changes while passes run many times a second (and
hundreds of thousands of times in a trace replay), so the tables are kept for
the last inventory tuple seen. Tuples of frozen GPUs are immutable and the
cache holds a reference, so identity is a safe key."""

from collections import defaultdict
from dataclasses import dataclass

from .snapshot import Gpu, PendingJob, Policy

Pool = tuple[str, bool]   # (GPU type, spot)


@dataclass(frozen=True)
class InventoryTables:
    type_of: dict[int, str]            # index -> type (a fresh copy is the ledger's free list)
    pool_of: dict[int, Pool]
    pools: dict[Pool, list[int]]       # pool -> its GPU indices
    types: frozenset[str]
    price: dict[int, float]


_last: list = [None, None]


def tables(gpus: tuple[Gpu, ...]) -> InventoryTables:
    if _last[0] is gpus:
        return _last[1]
    pools: dict[Pool, list[int]] = defaultdict(list)
    for gpu in gpus:
        pools[gpu.pool].append(gpu.index)
    built = InventoryTables(type_of={g.index: g.type for g in gpus}, pool_of={g.index: g.pool for g in gpus},
                            pools=dict(pools), types=frozenset(g.type for g in gpus),
                            price={g.index: g.price for g in gpus})
    _last[0], _last[1] = gpus, built
    return built


# A reclaim costs a job the work since its last save (with 30-minute checkpoints, 15 minutes
# on average) and a reload: one in every 4 hours run costs it about 7% of its run, less than
# spot saves, so spot stays the better place for it.
SPOT_HOURS_PER_RECLAIM = 4.0


def spot_first(job: PendingJob, policy: Policy) -> bool:
    """Spot is tried first while the job's reclaims are fewer than `spot_fallback_after` and one
    more for every SPOT_HOURS_PER_RECLAIM hours it has run (its GPU time so far over its GPUs);
    after that, on demand first. A count alone would move every long job to on demand at any
    reclaim rate, since a job that runs for days is reclaimed a few times even where spot is
    calm."""
    if not job.spot:
        return False
    hours_run = job.served / max(job.gpus, 1) / 3600
    return job.reclaims < policy.spot_fallback_after + int(hours_run / SPOT_HOURS_PER_RECLAIM)


def pool_rounds(types: tuple[str, ...] | None, spot: bool, pools, *, prefer_spot: bool = True) -> list[list[Pool]]:
    """The pools open to jobs of these GPU types, in rounds of preference. A spot-tolerant job:
    spot, then on demand; once reclaimed too often (not `prefer_spot`), on demand, then spot,
    so that it does not wait for on demand while spot GPUs stand free. Any other job: on
    demand only."""
    usable = [p for p in pools if types is None or p[0] in types]
    on_demand = [p for p in usable if not p[1]]
    if not spot:
        return [on_demand] if on_demand else []
    spot_pools = [p for p in usable if p[1]]
    rounds = (spot_pools, on_demand) if prefer_spot else (on_demand, spot_pools)
    return [r for r in rounds if r]
