"""Pools for cost: a GPU type bought spot or on demand, with a price and, for
spot, how often capacity is taken back. A pools file (YAML) is a list:

    - {name: od-a100, gpu_type: a100, spot: false, gpus: 64, price_per_gpu_hour: 4.10}
    - {name: spot-a100, gpu_type: a100, spot: true, gpus: 192, price_per_gpu_hour: 1.20,
       reclaim_rate_per_hour: 0.05}

The replay hands plan() GPUs with their type, price and purchase option; a
pool there is (type, spot), so two pools here may not share both. plan()
keeps a gang in one pool, tries spot first for jobs that tolerate it, and
on demand first for a job reclaimed too often for how long it has run."""

from dataclasses import dataclass

from ..scheduling import Gpu


class PoolError(ValueError):
    pass


@dataclass(frozen=True)
class Pool:
    name: str
    gpu_type: str
    spot: bool
    gpus: int
    price_per_gpu_hour: float
    reclaim_rate_per_hour: float = 0.0   # per running job: the chance per hour its capacity is reclaimed


def load_pools(text: str, source: str = "pools") -> list[Pool]:
    import yaml

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PoolError(f"{source}: not YAML ({exc})") from None
    if isinstance(raw, dict) and "pools" in raw:
        raw = raw["pools"]
    if not isinstance(raw, list) or not raw:
        raise PoolError(f"{source}: expected a list of pools")
    pools, names, kinds = [], set(), set()
    for n, item in enumerate(raw, 1):
        where = f"{source}: pool {n}"
        if not isinstance(item, dict):
            raise PoolError(f"{where}: expected a mapping with name, gpu_type, spot, gpus, price_per_gpu_hour")
        unknown = set(item) - set(Pool.__dataclass_fields__)
        missing = {"name", "gpus", "price_per_gpu_hour"} - set(item)
        if missing:
            raise PoolError(f"{where}: missing {', '.join(sorted(missing))}")
        if unknown:
            raise PoolError(f"{where}: unknown {', '.join(sorted(unknown))}")
        try:
            pool = Pool(name=str(item["name"]), gpu_type=str(item.get("gpu_type", item["name"])),
                        spot=bool(item.get("spot", False)), gpus=int(item["gpus"]),
                        price_per_gpu_hour=float(item["price_per_gpu_hour"]),
                        reclaim_rate_per_hour=float(item.get("reclaim_rate_per_hour") or 0.0))
        except (TypeError, ValueError) as exc:
            raise PoolError(f"{where}: {exc}") from None
        if pool.gpus < 1 or pool.price_per_gpu_hour < 0 or pool.reclaim_rate_per_hour < 0:
            raise PoolError(f"{where}: gpus must be >= 1, price and reclaim rate >= 0")
        if pool.name in names:
            raise PoolError(f"{where}: duplicate name {pool.name!r}")
        if (pool.gpu_type, pool.spot) in kinds:
            raise PoolError(f"{where}: a second {'spot' if pool.spot else 'on-demand'} pool of {pool.gpu_type}; "
                            "merge them (the scheduler sees one pool per GPU type and purchase option)")
        names.add(pool.name)
        kinds.add((pool.gpu_type, pool.spot))
        pools.append(pool)
    return pools


def pool_gpus(pools: list[Pool]) -> tuple[tuple[Gpu, ...], dict[int, str]]:
    """The GPUs, numbered pool after pool, and which pool each index is in."""
    gpus: list[Gpu] = []
    pool_of: dict[int, str] = {}
    for pool in pools:
        for _ in range(pool.gpus):
            pool_of[len(gpus)] = pool.name
            gpus.append(Gpu(len(gpus), pool.gpu_type, price=pool.price_per_gpu_hour, spot=pool.spot))
    return tuple(gpus), pool_of


def reclaim_rates(pools: list[Pool]) -> dict[str, float]:
    return {p.name: p.reclaim_rate_per_hour for p in pools if p.spot and p.reclaim_rate_per_hour > 0}


def cost(gpu_seconds_by_pool: dict[str, float], pools: list[Pool]) -> dict[str, float | None]:
    """What the GPU time cost (lost work included) and what spot saved against
    the same GPU time at the on-demand price of the same GPU type (None where
    the file has no on-demand pool of that type)."""
    by_name = {p.name: p for p in pools}
    on_demand: dict[str, float] = {}
    for p in pools:
        if not p.spot:
            on_demand.setdefault(p.gpu_type, p.price_per_gpu_hour)
    total, saving, comparable = 0.0, 0.0, True
    for name, seconds in sorted(gpu_seconds_by_pool.items()):
        pool = by_name[name]
        total += seconds / 3600 * pool.price_per_gpu_hour
        if pool.spot and pool.gpu_type in on_demand:
            saving += seconds / 3600 * (on_demand[pool.gpu_type] - pool.price_per_gpu_hour)
        elif pool.spot:
            comparable = False
    return {"cost": total, "spot_saving": saving if comparable else None}
