"""gqa against FIFO and Slurm-style multifactor on real traces, side by side.

    python benchmarks/simulate_traces.py                 # whole traces, ~70/85/95% utilisation
    python benchmarks/simulate_traces.py --quick         # a prefix of each trace: minutes, not tens
    python benchmarks/simulate_traces.py --traces DIR -o json

For each trace (Microsoft ITP 2021, all clusters merged; Alibaba GPU v2023,
training-like pods) and each utilisation target, the cluster is sized so the
offered load is the target: GPUs = GPU-seconds asked / arrival span / target,
arrivals kept at their real times. Both utilisations are reported: GPU time
over GPUs x makespan, and the same between the first and the last arrival.
On a whole trace they agree and land near the target; on a prefix (--quick)
the makespan is mostly the drain of its longest jobs (ITP has 18-day jobs),
so only the second says how busy the cluster was. That drain is also why the
GPU count is set from the offered load rather than searched for on a
prefix's measured utilisation.
Then the policies (all six of gqa.sim.policies.NAMES unless --policies)
replay the same workload on that cluster. The headline is each policy's
ratio to FIFO's, from one run. `--estimates MODE` picks the wall times
users ask for (as `gqa simulate --estimates`); the cluster is then sized
from the run times those wall times allow, as jobs killed at their limit
offer less.

Traces are read from --traces DIR (default: $GQA_TRACES, else traces/
under the repository root): the folder holding the ITP and Alibaba trace
files; a trace that is not there is skipped with a message. Team,
user and wall time are derived (see `gqa simulate`'s assumption lines)."""

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gqa.sim import cluster, derive, load_trace, ratios, summarize  # noqa: E402
from gqa.sim.policies import NAMES, run_policy  # noqa: E402
from gqa.sim.estimates import MODES, Estimates  # noqa: E402

TRACES = {"itp": "itp-2021/raw-traces.tar.gz", "alibaba": "alibaba-gpu-v2023/openb_pod_list_default.csv"}
TARGETS = (0.70, 0.85, 0.95)
QUICK_JOBS = {"itp": 4000, "alibaba": 1500}      # --quick: the first N arrivals (~5 and ~22 days)
SHOWN = (("mean_wait", "mean wait", "t"), ("p99_wait", "p99 wait", "t"), ("mean_jct", "mean JCT", "t"),
         ("mean_slowdown", "slowdown", "f"), ("utilisation", "util", "%"),
         ("utilisation_during_arrivals", "util (arr.)", "%"),
         ("max_team_slowdown", "max team sd", "f"), ("jain_fairness", "Jain", "f"))


def offered_gpus(jobs, target: float) -> int:
    """The cluster on which the jobs' offered load (run times, as limited by
    their wall times) is `target`, and on which the largest job fits."""
    span = max(j.submit for j in jobs) - min(j.submit for j in jobs) or 1.0
    demand = sum(j.gpus * min(j.duration, j.wall_time) for j in jobs)
    return max(max(j.gpus for j in jobs), round(demand / span / target))


def replay(args) -> tuple[str, dict, float]:
    """One policy on one workload (a separate process: the machine's cores run them side by side)."""
    path, gpus, policy, limit, seed, estimates = args
    trace = load_trace(path)
    work = derive(trace.jobs, cluster_gpus=gpus, seed=seed, limit=limit, estimates=Estimates(estimates))
    began = time.perf_counter()
    result = run_policy(policy, work, cluster(gpus))
    return policy, summarize(result), time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=os.environ.get("GQA_TRACES", str(ROOT / "traces")),
                        help="the folder holding the trace files (default: $GQA_TRACES, else traces/)")
    parser.add_argument("--quick", action="store_true", help="a prefix of each trace")
    parser.add_argument("--only", default=",".join(TRACES), help="itp, alibaba or both")
    parser.add_argument("--targets", default=",".join(f"{t:g}" for t in TARGETS), help="utilisation targets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--estimates", default="model", choices=MODES,
                        help="the wall times users ask for (see gqa simulate --estimates)")
    parser.add_argument("--policies", default=",".join(NAMES), help=f"any of {', '.join(NAMES)}")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("-o", "--output", default="table", choices=("table", "json"))
    args = parser.parse_args()
    targets = [float(t) for t in args.targets.split(",")]
    rows = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for name in args.only.split(","):
            path = Path(args.traces) / TRACES[name]
            if not path.exists():
                print(f"skipping {name}: {path} not found (use --traces DIR)", file=sys.stderr)
                continue
            trace = load_trace(path)
            limit = QUICK_JOBS[name] if args.quick else None
            sized = derive(trace.jobs, cluster_gpus=10**9, seed=args.seed, limit=limit,
                           estimates=Estimates(args.estimates)).jobs
            for target in targets:
                gpus = offered_gpus(sized, target)
                print(f"{name} {target:.0%}: {gpus} GPUs", file=sys.stderr)
                jobs = [(str(path), gpus, p, limit, args.seed, args.estimates) for p in args.policies.split(",")]
                summaries, seconds = {}, {}
                for policy, summary, took in pool.map(replay, jobs):
                    summaries[policy], seconds[policy] = summary, took
                    print(f"  {policy}: {summary['jobs']} jobs in {took:.0f}s", file=sys.stderr)
                jobs_replayed = next(iter(summaries.values()))["jobs"]
                rows.append({"trace": name, "target": target, "gpus": gpus, "jobs": jobs_replayed,
                             "estimates": args.estimates,
                             "policies": summaries, "ratios_vs_fifo": ratios(summaries), "seconds": seconds})
                if args.output == "table":
                    _print_rows(rows[-1:])
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    return 0


def _print_rows(rows) -> None:
    from gqa.models.units import format_duration

    def cell(value, kind):
        if value is None:
            return "-"
        return format_duration(value) if kind == "t" else f"{value:.1%}" if kind == "%" else f"{value:.2f}"

    for row in rows:
        print(f"\n{row['trace']}: {row['jobs']} jobs on {row['gpus']} GPUs (target {row['target']:.0%})")
        print(f"  {'policy':<12}" + "".join(f"{label:>13}" for _, label, _ in SHOWN))
        for policy, s in row["policies"].items():
            print(f"  {policy:<12}" + "".join(f"{cell(s[key], kind):>13}" for key, _, kind in SHOWN))
        for policy, r in row["ratios_vs_fifo"].items():
            print(f"  {policy + '/fifo':<12}" + "".join(
                f"{(f'{r[key]:.2f}x' if r.get(key) is not None else '-'):>13}" for key, _, _ in SHOWN))


if __name__ == "__main__":
    sys.exit(main())
