"""Pools for cost: a GPU type bought spot or on demand, with a price and, for
spot, how often capacity is taken back. A pools file (YAML) is a list:

    - {name: od-a100, gpu_type: a100, spot: false, gpus: 64, price_per_gpu_hour: 4.10}
    - {name: spot-a100, gpu_type: a100, spot: true, gpus: 192, price_per_gpu_hour: 1.20,
       reclaim_rate_per_hour: 0.05}

The replay hands plan() GPUs with their type, price and purchase option; a
pool there is (type, spot), so two pools here may not share both. plan()
keeps a gang in one pool, tries spot first for jobs that tolerate it, and
on demand first for a job reclaimed too often for how long it has run."""

import math
import reprlib
from dataclasses import dataclass

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..models import safe_yaml
from ..models.errors import SpecError
from ..scheduling import Gpu


class PoolError(ValueError):
    pass


# A replay's cluster holds each GPU: 1,000,000 took 8 s and 0.9 GB for two jobs. The largest
# clusters built have a few hundred thousand.
MAX_GPUS = 1_000_000
# A reclaim rate per hour a job runs on spot: 20 times the highest measured (spot_facts: 0.52 on
# V100s over a week). An infinite rate reclaimed every start at once, and the replay never ended.
MAX_RECLAIM_RATE = 10.0


def _shown(value: object) -> str:
    """A value as a message quotes it, cut short: a few aliases can make a YAML value huge."""
    return reprlib.repr(value)


def _name(value: object, what: str) -> str:
    """A name: text or a number (a100, 4090), not empty; YAML's null would be the pool 'None'."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not str(value).strip():
        raise ValueError(f"{what} must be a name, got {_shown(value)}")
    return str(value).strip()


def _flag(value: object, what: str) -> bool:
    """YAML's true or false; `yes`, `no` and a quoted 'no' are text, and bool() of them is True."""
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false, got {_shown(value)}")
    return value


def _finite(value: object) -> float | None:
    """A YAML int or float as a finite float, else None: YAML's true is an int to Python, .inf a
    float, and an int of 400 digits has no float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _count(value: object, what: str) -> int:
    number = value if isinstance(value, int) and not isinstance(value, bool) else _finite(value)
    if number is None or number != int(number) or number < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {_shown(value)}")
    if number > MAX_GPUS:
        raise ValueError(f"{what} must be at most {MAX_GPUS:,}, the most a replay may have, got {_shown(value)}")
    return int(number)


def _amount(value: object, what: str, most: float = math.inf) -> float:
    """A price or a rate: a finite number from 0 to `most`."""
    number = _finite(value)
    if number is None or not 0 <= number <= most:
        bound = "a finite number >= 0" if most == math.inf else f"a number from 0 to {most:g}"
        raise ValueError(f"{what} must be {bound}, got {_shown(value)}")
    return number


@dataclass(frozen=True)
class Pool:
    name: str
    gpu_type: str
    spot: bool
    gpus: int
    price_per_gpu_hour: float
    reclaim_rate_per_hour: float = 0.0   # per running job: the chance per hour its capacity is reclaimed


KEYS = tuple(Pool.__dataclass_fields__)


def load_pools(text: str, source: str = "pools") -> list[Pool]:
    raw, lines = _parsed(text, source)
    if isinstance(raw, dict) and "pools" in raw:
        raw = raw["pools"]
    if not isinstance(raw, list) or not raw:
        raise PoolError(f"{source}: expected a list of pools")
    pools, names, kinds, total = [], set(), set(), 0
    for n, item in enumerate(raw, 1):
        where = f"{source}: line {lines[n - 1]}: pool {n}" if len(lines) == len(raw) else f"{source}: pool {n}"
        if not isinstance(item, dict):
            raise PoolError(f"{where}: expected a mapping with name, gpu_type, spot, gpus, price_per_gpu_hour")
        # a key may be any YAML value: `{name: a, 0.5}` has the key 0.5, written without its name
        unknown = [key if isinstance(key, str) else _shown(key) for key in item if key not in KEYS]
        missing = {"name", "gpus", "price_per_gpu_hour"} - set(item)
        if missing:
            raise PoolError(f"{where}: missing {', '.join(sorted(missing))}")
        if unknown:
            raise PoolError(f"{where}: unknown {', '.join(unknown)} (a pool's keys: {', '.join(KEYS)})")
        try:
            name = _name(item["name"], "name")
            rate = item.get("reclaim_rate_per_hour")
            pool = Pool(name=name, gpu_type=_name(item.get("gpu_type", name), "gpu_type"),
                        spot=_flag(item.get("spot", False), "spot"), gpus=_count(item["gpus"], "gpus"),
                        price_per_gpu_hour=_amount(item["price_per_gpu_hour"], "price_per_gpu_hour"),
                        reclaim_rate_per_hour=_amount(0.0 if rate is None else rate, "reclaim_rate_per_hour",
                                                      MAX_RECLAIM_RATE))
        except ValueError as exc:
            raise PoolError(f"{where}: {exc}") from None
        total += pool.gpus
        if total > MAX_GPUS:
            raise PoolError(f"{where}: the pools hold {total:,} GPUs, over the {MAX_GPUS:,} a replay may have")
        if pool.name in names:
            raise PoolError(f"{where}: duplicate name {pool.name!r}")
        if (pool.gpu_type, pool.spot) in kinds:
            raise PoolError(f"{where}: a second {'spot' if pool.spot else 'on-demand'} pool of {pool.gpu_type}; "
                            "merge them (the scheduler sees one pool per GPU type and purchase option)")
        names.add(pool.name)
        kinds.add((pool.gpu_type, pool.spot))
        pools.append(pool)
    return pools


def _parsed(text: str, source: str) -> tuple[object, list[int]]:
    """The file's data, and the line of each pool in its list (none where it has no list): read as
    job files are (models/safe_yaml.py: YAML 1.2's core schema, so `spot: yes` is text, not true;
    a key given twice refused, not the last kept; aliases, nesting and numbers bounded)."""
    try:
        data, node = safe_yaml.load(text)
    except SpecError as exc:
        raise PoolError(f"{source}: {exc}") from None
    return data, _lines(node)


def _lines(node: Node | None) -> list[int]:
    """Each pool's line in the file, where the pools are a YAML list (or a `pools:` key's)."""
    if isinstance(node, MappingNode):   # a second `pools:` key is refused
        node = next((value for key, value in node.value
                     if isinstance(key, ScalarNode) and key.value == "pools"), None)
    return [item.start_mark.line + 1 for item in node.value] if isinstance(node, SequenceNode) else []


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
