"""Tables derived from the GPU inventory, built once per inventory.

The inventory rarely changes while passes run many times a second (and
hundreds of thousands of times in a trace replay), so the tables are kept for
the last inventory tuple seen. Tuples of frozen GPUs are immutable and the
cache holds a reference, so identity is a safe key."""

from collections import defaultdict
from dataclasses import dataclass

from .snapshot import Gpu

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
