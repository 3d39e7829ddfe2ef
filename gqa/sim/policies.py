"""Every policy a replay can run, by name: the production pass under a preset
(gqa's own and the baselines it is measured against), the same pass handed
the true run times (the oracle), or the Tiresias-style LAS replay."""

from ..scheduling import Gpu
from ..scheduling.presets import preset
from .engine import SimResult, simulate
from .las import RESTART, simulate_las
from .workload import Workload

NAMES = ("fifo", "fifo-easy", "multifactor", "gqa", "las", "sjf-oracle")
ORACLES = {"sjf-oracle"}   # handed each job's true run time


def run_policy(name: str, work: Workload, gpus: tuple[Gpu, ...], **engine_options) -> SimResult:
    """`engine_options` are `simulate()`'s. The LAS replay takes only `restart_cost`
    (its own RESTART when none is given) and the pools: it counts one pool of
    identical GPUs that is never reclaimed, so it refuses anything else."""
    if name not in NAMES:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(NAMES)}")
    if name == "las":
        pool_of = engine_options.get("pool_of") or {g.index: g.type for g in gpus}
        pools = set(pool_of.values())
        if len(pools) > 1 or len({g.price for g in gpus}) > 1 or any(engine_options.get("reclaim_per_hour") or {}):
            raise ValueError(f"las counts one pool of identical GPUs, never reclaimed; these are {len(pools)} "
                             "pools, at several prices or with reclaims")
        price = gpus[0].price if gpus else 0.0
        return simulate_las(work, len(gpus), name=name, price=price, pool=next(iter(pools), "gpu"),
                            restart=engine_options.get("restart_cost") or RESTART)
    return simulate(work, gpus, preset(name), name=name, oracle=name in ORACLES, **engine_options)
