"""Every policy a replay can run, by name: the production pass under a preset
(gqa's own and the baselines it is measured against), the same pass handed
the true run times (the oracle), or the Tiresias-style LAS replay (`las`
blind to the jobs' tiers, as Tiresias is; `las-tiers` honouring them).

`gqa-slice` and the LAS replays preempt, and are replayed on the same terms: a
stopped job checkpoints as it stops (gqa.runtime saves on SIGTERM), and each
resume costs `restart_cost` (las.RESTART when none is given)."""

from ..models.units import format_duration
from ..scheduling import Gpu, Policy
from ..scheduling.horizon import LIMITS, backfill_by_choice
from ..scheduling.presets import preset
from .engine import SimResult, simulate
from .las import RESTART, simulate_las
from .workload import Workload

NAMES = ("fifo", "fifo-easy", "multifactor", "gqa", "gqa-slice", "las", "las-tiers", "sjf-oracle")
LAS = {"las": False, "las-tiers": True}   # the LAS replays: whether each honours the jobs' tiers
ORACLES = {"sjf-oracle"}   # handed each job's true run time


def las_refuses(gpus: tuple[Gpu, ...], pool_of: dict[int, str] | None = None,
                reclaim_per_hour: dict[str, float] | None = None) -> str | None:
    """Why the LAS replay cannot model this cluster, or None: it counts one pool of
    identical GPUs that is never reclaimed."""
    pools = set((pool_of or {g.index: g.type for g in gpus}).values())
    if len(pools) > 1 or len({g.price for g in gpus}) > 1 or any(reclaim_per_hour or {}):
        return (f"las counts one pool of identical GPUs, never reclaimed; these are {len(pools)} pools, "
                "at several prices or with reclaims")
    return None


def slicing_stalls(restart_cost: float | None) -> str | None:
    """Why gqa-slice cannot be replayed with this reload per resume, or None: a resume that reloads
    for as long as slicing lets an attempt run may be stopped before any new work, again and again
    (the replay would never end, nor would the job in a queue)."""
    least_run = preset("gqa-slice").slice_min_run
    if (restart_cost or RESTART) < least_run:
        return None
    return (f"a resume's reload of {format_duration(restart_cost)} is at least its {format_duration(least_run)} "
            "least run, so slicing could stop a resumed job before any new work, again and again; give a "
            f"restart cost under {format_duration(least_run)}")


def left_out(work: Workload, gpus: tuple[Gpu, ...], pool_of: dict[int, str] | None = None,
             reclaim_per_hour: dict[str, float] | None = None, restart_cost: float | None = None) -> dict[str, str]:
    """The policies a replay of every policy leaves out, each with why: those that cannot model
    the cluster or the reload per resume (asked for by name, run_policy refuses them), and
    las-tiers where every job is in one tier, where it would replay as las."""
    out = {name: why for name in NAMES if (why := _cannot(name, gpus, pool_of, reclaim_per_hour, restart_cost))}
    if "las-tiers" not in out and len({job.tier for job in work.jobs}) <= 1:
        out["las-tiers"] = "every job is in one tier, where it replays as las"
    return out


def refused(name: str, gpus: tuple[Gpu, ...], pool_of: dict[int, str] | None = None,
            reclaim_per_hour: dict[str, float] | None = None, restart_cost: float | None = None) -> str | None:
    """Why run_policy refuses to replay `name` on this cluster with this reload per resume, or None."""
    why = _cannot(name, gpus, pool_of, reclaim_per_hour, restart_cost)
    return f"gqa-slice: {why}" if why and name == "gqa-slice" else why


def _cannot(name: str, gpus: tuple[Gpu, ...], pool_of: dict[int, str] | None,
            reclaim_per_hour: dict[str, float] | None, restart_cost: float | None) -> str | None:
    """Why `name` cannot replay this cluster with this reload per resume, as left_out words it; or None."""
    if name in LAS:
        return las_refuses(gpus, pool_of, reclaim_per_hour)
    return slicing_stalls(restart_cost) if name == "gqa-slice" else None


def run_policy(name: str, work: Workload, gpus: tuple[Gpu, ...], *, backfill_by: str = LIMITS,
               **engine_options) -> SimResult:
    """`engine_options` are `simulate()`'s. `backfill_by`: what gqa's own policies (gqa,
    gqa-slice) count a job's run as when they backfill (scheduling/horizon.py); the baselines
    count limits, as Slurm does. The LAS replays take only `restart_cost` (its own RESTART
    when none is given) and the pools; a policy that cannot replay the cluster is refused (`refused`)."""
    if name not in NAMES:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(NAMES)}")
    base = Policy(backfill_by=backfill_by_choice(backfill_by))
    why = refused(name, gpus, engine_options.get("pool_of"), engine_options.get("reclaim_per_hour"),
                  engine_options.get("restart_cost"))
    if why:
        raise ValueError(why)
    if name in LAS:
        pool_of = engine_options.get("pool_of") or {g.index: g.type for g in gpus}
        price = gpus[0].price if gpus else 0.0
        return simulate_las(work, len(gpus), name=name, price=price, pool=next(iter(pool_of.values()), "gpu"),
                            restart=engine_options.get("restart_cost") or RESTART, tiers=LAS[name])
    if name == "gqa-slice":
        engine_options = {**engine_options, "save_on_preempt": True,
                          "restart_cost": engine_options.get("restart_cost") or RESTART}
    return simulate(work, gpus, preset(name, base), name=name, oracle=name in ORACLES, **engine_options)
