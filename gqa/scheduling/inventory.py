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


def spot_open(job: PendingJob, policy: Policy) -> bool:
    """Spot is tried first for a spot-tolerant job until `spot_fallback_after` reclaims."""
    return job.spot and job.reclaims < policy.spot_fallback_after


def pool_rounds(types: tuple[str, ...] | None, spot: bool, pools) -> list[list[Pool]]:
    """The pools open to jobs of these GPU types, in rounds of preference: spot, then on
    demand, where spot is open to them; else on demand only."""
    usable = [p for p in pools if types is None or p[0] in types]
    if spot:
        return [r for r in ([p for p in usable if p[1]], [p for p in usable if not p[1]]) if r]
    on_demand = [p for p in usable if not p[1]]
    return [on_demand] if on_demand else []
