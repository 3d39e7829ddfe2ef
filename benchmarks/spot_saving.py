"""Spot pools: what they save against what they cost in job completion time.

    python benchmarks/spot_saving.py                  # whole traces: minutes (see below)
    python benchmarks/spot_saving.py --mixes 1 --levels low,medium   # whole traces, some cases
    python benchmarks/spot_saving.py --quick          # a prefix of each trace (ITP 4,000 jobs, Alibaba 1,500)
    python benchmarks/spot_saving.py --trace jobs.csv --limit 200 -o json

For each trace (Microsoft ITP 2021, all clusters merged; Alibaba GPU v2023)
the cluster is sized for 85% offered load as benchmarks/simulate_traces.py
sizes it, and the gqa policy replays the same workload on it:
- all on demand: the baseline, its cost and mean JCT;
- each mix (25/50/75/100% of the GPUs bought spot, the rest on demand) at
  each reclaim level (gqa.sim.spot_facts.RECLAIM_LEVELS: the Spot Instance
  Advisor's worst band, the measured 4- and 16-node groups, the measured
  single V100, a bad zone), with and without a checkpoint on the notice.
Every job tolerates spot (tried first); reclaimed more than twice and more
than once per 4 hours run, it tries on demand first, and spot where on demand
has no room (the production rule). GPUs are A100s at p4d.24xlarge's prices: on demand
$4.10 per GPU-hour, spot the middle of the range seen, $0.92. A resumed
attempt pays RESTART seconds of reload; periodic checkpoints every 30
minutes. Reclaimed capacity comes back at once (the pool keeps its size):
the replay charges a reclaim the work it loses and the wait for a new
start, not a spell without spot capacity.

Columns: saving = 1 - cost / all-on-demand cost (lost work is paid for);
JCT = mean JCT / all-on-demand's; reclaims per job; lost = GPU time that
did not advance a job (work since the last save, notices, reloads) over the
GPU time the jobs needed. The goal: saving >= 60% for a JCT penalty <= 10%.

A replay at the high reclaim rate costs three to five times one all on
demand (whole ITP, 75% spot: 32-38 s against 10 s; all spot 40-50 s): every
reclaim is another start.

Alibaba's cluster at 85% is 13 GPUs, too small to split into two pools that
each hold its 8-GPU gangs: its arrivals are compressed (load x N, run times
unchanged) until the smaller pool of every mix holds its largest gang."""

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.simulate_traces import TRACES, check_shared, offered_gpus  # noqa: E402
from gqa.scheduling.presets import preset  # noqa: E402
from gqa.sim import derive, load_trace, simulate, summarize  # noqa: E402
from gqa.sim.pools import Pool, cost, pool_gpus, reclaim_rates  # noqa: E402
from gqa.sim.spot_facts import PRICES, RECLAIM_LEVELS  # noqa: E402

TARGET = 0.85
MIXES = (0.25, 0.5, 0.75, 1.0)
RESTART = 60.0                  # seconds to reload a checkpoint and warm up, per resume
CHECKPOINT = 1800.0
INSTANCE = PRICES["p4d.24xlarge"]
QUICK_JOBS = {"itp": 4000, "alibaba": 1500}
GOAL_SAVING, GOAL_PENALTY = 0.60, 1.10


def pools_for(gpus: int, spot_share: float, level: str) -> list[Pool]:
    spot = round(gpus * spot_share)
    out = []
    if spot < gpus:
        out.append(Pool("on-demand", INSTANCE.gpu, False, gpus - spot, INSTANCE.on_demand_per_gpu_hour))
    if spot:
        out.append(Pool("spot", INSTANCE.gpu, True, spot, INSTANCE.spot_per_gpu_hour,
                        reclaim_rate_per_hour=RECLAIM_LEVELS[level]))
    return out


def smallest_pool(gpus: int, mixes) -> int:
    return min(min(round(gpus * m), gpus - round(gpus * m)) if 0 < m < 1 else gpus for m in mixes)


def sized(path: str, *, limit: int | None, seed: int, mixes) -> tuple[float, int, int]:
    """(arrival-rate multiplier, GPUs, jobs): the cluster for TARGET offered load, the arrivals
    compressed by the smallest whole factor at which every mix's smaller pool holds the largest gang."""
    trace = load_trace(path).jobs
    load = 1.0
    while True:
        jobs = derive(trace, cluster_gpus=10**9, seed=seed, limit=limit, load=load).jobs
        gpus = offered_gpus(jobs, TARGET)
        if smallest_pool(gpus, mixes) >= max(j.gpus for j in jobs):
            return load, gpus, len(jobs)
        load += 1


def replay(args) -> dict:
    """One replay (a separate process: the machine's cores run them side by side)."""
    path, limit, load, gpus, spot_share, level, notice, seed = args
    pools = pools_for(gpus, spot_share, level)
    work = derive(load_trace(path).jobs, cluster_gpus=gpus, seed=seed, limit=limit, load=load, spot=True)
    policy = preset("gqa")
    inventory, pool_of = pool_gpus(pools)
    began = time.perf_counter()
    result = simulate(work, inventory, policy, name="gqa", pool_of=pool_of, reclaim_per_hour=reclaim_rates(pools),
                      checkpoint_interval=CHECKPOINT, seed=seed, save_on_notice=notice, restart_cost=RESTART)
    summary = summarize(result, costs=cost(result.gpu_seconds_by_pool, pools))
    needed = math.fsum(o.gpus * min(o.duration, o.wall_time) for o in result.outcomes if o.end is not None)
    held = math.fsum(o.gpu_seconds for o in result.outcomes if o.end is not None)
    return {"spot_share": spot_share, "level": level if spot_share else None, "notice": notice,
            "spot_gpus": sum(p.gpus for p in pools if p.spot), "jobs": summary["jobs"],
            "unfinished": summary["unfinished"], "cost": summary["cost"], "mean_jct": summary["mean_jct"],
            "reclaims": summary["reclaims"], "lost_gpu_hours": (held - needed) / 3600,
            "needed_gpu_hours": needed / 3600, "seconds": time.perf_counter() - began}


def compare(runs: list[dict]) -> list[dict]:
    """Each spot run against the all-on-demand one: saving, JCT ratio, reclaims per job, lost share."""
    [base] = [r for r in runs if r["spot_share"] == 0]
    rows = []
    for r in runs:
        rows.append({**r, "saving": 1 - r["cost"] / base["cost"], "jct_ratio": r["mean_jct"] / base["mean_jct"],
                     "reclaims_per_job": r["reclaims"] / r["jobs"],
                     "lost_share": r["lost_gpu_hours"] / r["needed_gpu_hours"]})
    return rows


def verdict(rows: list[dict]) -> str:
    ok = [r for r in rows if r["spot_share"] and not r["unfinished"]
          and r["saving"] >= GOAL_SAVING and r["jct_ratio"] <= GOAL_PENALTY]
    if ok:
        best = max(ok, key=lambda r: r["saving"])
        return (f"goal met by {len(ok)} of {sum(1 for r in rows if r['spot_share'])} mixes; the best: "
                + _label(best) + f", saving {best['saving']:.1%} for JCT x{best['jct_ratio']:.3f}")
    within = [r for r in rows if r["spot_share"] and not r["unfinished"] and r["jct_ratio"] <= GOAL_PENALTY]
    text = "goal not met"
    if within:
        best = max(within, key=lambda r: r["saving"])
        text += f"; the most saved within a 10% JCT penalty: {_label(best)}, {best['saving']:.1%}"
    return text


def _label(r: dict) -> str:
    if not r["spot_share"]:
        return "all on demand"
    return f"{r['spot_share']:.0%} spot, {r['level']} reclaims, {'save on notice' if r['notice'] else 'no save'}"


def run_trace(path: str, *, limit: int | None, seed: int, workers: int, mixes=MIXES,
              levels=tuple(RECLAIM_LEVELS)) -> dict:
    load, gpus, _ = sized(path, limit=limit, seed=seed, mixes=MIXES)  # one cluster, whichever mixes run
    tasks = [(path, limit, load, gpus, 0.0, next(iter(levels)), False, seed)]
    tasks += [(path, limit, load, gpus, m, lv, n, seed) for m in mixes for lv in levels for n in (False, True)]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            runs = [_said(run) for run in pool.map(replay, tasks)]
    else:
        runs = [_said(replay(t)) for t in tasks]
    rows = compare(runs)
    return {"trace": path, "gpus": gpus, "load": load, "jobs": runs[0]["jobs"], "rows": rows, "verdict": verdict(rows)}


def _said(run: dict) -> dict:
    print(f"  {_label(run)}: {run['jobs']} jobs in {run['seconds']:.0f}s", file=sys.stderr, flush=True)
    return run


def table(result: dict, name: str) -> list[str]:
    lines = [f"{name}: {result['jobs']} jobs on {result['gpus']} A100s (85% offered load"
             + (f", arrivals x{result['load']:g}" if result["load"] != 1 else "") + f"), gqa policy, "
             f"restart {RESTART:.0f} s, checkpoints every {CHECKPOINT / 60:.0f} min",
             f"  {'spot':>5} {'reclaims':>8} {'notice':>7} {'saving':>8} {'JCT':>7} {'recl/job':>9} "
             f"{'lost':>7} {'unfin.':>6}"]
    for r in result["rows"]:
        lines.append(f"  {r['spot_share']:>5.0%} {r['level'] or '-':>8} {('save' if r['notice'] else '-'):>7} "
                     f"{r['saving']:>8.1%} {r['jct_ratio']:>6.3f}x {r['reclaims_per_job']:>9.3f} "
                     f"{r['lost_share']:>7.2%} {r['unfinished']:>6}")
    lines.append(f"  {result['verdict']}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=os.environ.get("GQA_TRACES", str(ROOT / "traces")),
                        help="the folder holding the trace files (default: $GQA_TRACES, else traces/)")
    parser.add_argument("--trace", help="one trace file instead (any format gqa simulate reads)")
    parser.add_argument("--only", default=",".join(TRACES), help="itp, alibaba or both")
    parser.add_argument("--quick", action="store_true", help="a prefix of each trace")
    parser.add_argument("--limit", type=int, help="only the first N jobs")
    parser.add_argument("--mixes", default=",".join(f"{m:g}" for m in MIXES), help="shares of the GPUs bought spot")
    parser.add_argument("--levels", default=",".join(RECLAIM_LEVELS), help="reclaim levels: low, medium, high")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("-o", "--output", default="table", choices=("table", "json"))
    args = parser.parse_args()
    check_shared(parser, args)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    try:
        mixes = tuple(float(m) for m in args.mixes.split(","))
    except ValueError:
        parser.error(f"--mixes: shares between 0 and 1, comma-separated, not {args.mixes!r}")
    levels = tuple(level.strip() for level in args.levels.split(","))
    if not all(0 < m <= 1 for m in mixes) or not set(levels) <= set(RECLAIM_LEVELS):
        parser.error(f"--mixes: shares in (0, 1]; --levels: from {', '.join(RECLAIM_LEVELS)}")
    if args.trace:
        traces = {Path(args.trace).name: (Path(args.trace), args.limit)}
    else:
        traces = {name: (Path(args.traces) / TRACES[name], args.limit or (QUICK_JOBS[name] if args.quick else None))
                  for name in args.only.split(",")}
    results = {}
    for name, (path, limit) in traces.items():
        if not path.exists():
            print(f"skipping {name}: {path} not found (use --traces DIR)", file=sys.stderr)
            continue
        began = time.perf_counter()
        results[name] = run_trace(str(path), limit=limit, seed=args.seed, workers=args.workers, mixes=mixes,
                                  levels=levels)
        print(f"{name}: {len(results[name]['rows'])} replays in {time.perf_counter() - began:.0f}s", file=sys.stderr)
        if args.output == "table":
            print("\n".join(table(results[name], name)) + "\n", flush=True)
    if not results:
        print("no trace to replay: see the messages above", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
