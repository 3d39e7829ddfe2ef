"""`gqa simulate`: replay a cluster trace through the production scheduling
pass under each policy, and compare."""

from typing import Annotated, Optional

import typer

from .options import Output, check_output
from .output import console, fail, note, print_json

Opt = typer.Option


def simulate(
    trace: Annotated[str, typer.Argument(
        help="A trace: CSV (submit_time,duration,gpus[,team,priority,wall_time,user,name]), the ITP "
             "raw-traces.tar.gz (PATH:cluster04 for one cluster) or an Alibaba openb_pod_list csv.",
        show_default=False)],
    gpus: Annotated[Optional[int], Opt("--gpus", "-G", help="GPUs in the simulated cluster.")] = None,
    pools: Annotated[Optional[str], Opt("--pools", help="A YAML list of pools with prices (instead of "
                                                        "or matching --gpus): cost and spot saving.")] = None,
    policies: Annotated[str, Opt("--policies", help="Comma-separated: fifo, multifactor, gqa.")]
        = "fifo,multifactor,gqa",
    load: Annotated[float, Opt("--load", help="Arrival-rate multiplier: 2 halves the gaps.")] = 1.0,
    seed: Annotated[int, Opt("--seed", help="Seed for what the trace lacks (wall times, reclaims).")] = 0,
    limit: Annotated[Optional[int], Opt("--limit", help="Only the first N jobs.")] = None,
    checkpoint: Annotated[str, Opt("--checkpoint-interval",
                                   help="How often requeued jobs had checkpointed.")] = "30m",
    plot: Annotated[Optional[str], Opt("--plot", help="Write wait-time CDFs to this PNG (needs matplotlib).")]
        = None,
    output: Output = "table",
):
    """Replay TRACE under each policy with the real scheduling pass; print waits,
    completion times, slowdown, utilisation and fairness, and ratios against FIFO.

    Examples: gqa simulate raw-traces.tar.gz --gpus 1300 | gqa simulate jobs.csv --gpus 8 -o json
    """
    import time

    from gqa.models.errors import SpecError
    from gqa.models.units import parse_duration
    from gqa.scheduling.presets import NAMES, preset
    from gqa.sim import cluster, derive, load_trace, simulate as replay, summarize
    from gqa.sim.engine import production_eta
    from gqa.sim.pools import PoolError, cost, load_pools, pool_gpus, reclaim_rates
    from gqa.sim.report import as_json, plot_waits, print_table
    from gqa.sim.trace import TraceError

    fmt = check_output(output)
    names = [p.strip().lower() for p in policies.split(",") if p.strip()]
    unknown = [p for p in names if p not in NAMES]
    if unknown or not names:
        fail(f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(NAMES)}")
    if load <= 0:
        fail("--load must be positive")
    if limit is not None and limit < 1:
        fail("--limit must be at least 1")
    try:
        interval = float(parse_duration(checkpoint, bare_unit="s"))
    except SpecError as exc:
        fail(f"--checkpoint-interval: {exc}")
    pool_list = []
    if pools:
        try:
            with open(pools) as f:
                pool_list = load_pools(f.read(), pools)
        except OSError as exc:
            fail(f"{pools}: {exc.strerror}")
        except PoolError as exc:
            fail(str(exc))
        inventory = pool_gpus(pool_list)
        if gpus is not None and gpus != len(inventory):
            fail(f"--gpus {gpus} does not match the {len(inventory)} GPUs in {pools}; give one or the other")
        largest = max(p.gpus for p in pool_list)
    elif gpus is None or gpus < 1:
        fail("say how many GPUs to simulate: --gpus N (or --pools FILE)")
    else:
        inventory, largest = cluster(gpus), gpus
    try:
        loaded = load_trace(trace)
    except TraceError as exc:
        fail(str(exc))
    work = derive(loaded.jobs, cluster_gpus=largest, seed=seed, load=load, limit=limit, notes=loaded.notes)
    if not work.jobs:
        fail(f"{trace}: no jobs to replay")
    if pool_list:
        work.assumptions.append(f"pools: {', '.join(f'{p.name} ({p.gpus} GPUs)' for p in pool_list)}; "
                                "a gang stays in one pool; spot reclaims requeue the job from its last "
                                f"checkpoint (every {checkpoint})")
    eta = production_eta()
    results, summaries = {}, {}
    for name in names:
        began = time.perf_counter()
        result = replay(work, inventory, preset(name), name=name, checkpoint_interval=interval,
                        reclaim_per_hour=reclaim_rates(pool_list), seed=seed, eta=eta)
        costs = cost(result.gpu_seconds_by_type, pool_list) if pool_list else None
        results[name], summaries[name] = result, summarize(result, costs=costs)
        if fmt == "table":
            note(f"{name}: {len(work.jobs)} jobs replayed in {time.perf_counter() - began:.1f}s "
                 f"({result.passes} scheduling passes)")
    if plot:
        try:
            plot_waits(results, plot, f"{loaded.name}, {len(inventory)} GPUs")
        except RuntimeError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"{plot}: {exc.strerror}")
    if fmt == "json":
        print_json(as_json(loaded.name, len(inventory), len(work.jobs), work.assumptions, summaries))
    else:
        print_table(console(), loaded.name, len(inventory), len(work.jobs), work.assumptions, summaries)
