"""A replay with tens of thousands waiting at once, and what it costs, against a revision.

    python benchmarks/replay_backlog.py --traces DIR                        # whole ITP, 3x arrivals
    python benchmarks/replay_backlog.py --traces DIR --against HEAD~1 --policies fifo-easy,multifactor
    python benchmarks/replay_backlog.py --traces DIR --limit 15000 -o json

The trace's jobs arrive --load times as fast (3: a third of the gaps) on the
cluster the trace table gives it at 95% load under `model` estimates (ITP:
1,196 GPUs), so the queue grows to tens of thousands of waiting jobs: what a
replay of a saturated trace, and a dispatcher with a long backlog, must
survive. Each policy replays in a process of its own, one at a time; the
figure is its CPU time (the machine's other load slows wall time, not this),
with its peak memory, the most jobs waiting at once and the mean JCT.

With --against REV the same replays run from that revision of this
repository (its sources read with git archive, this environment's packages),
interleaved with this checkout's, --rounds times; each row gives the median
CPU time of each and their ratio, and says whether the two decided the same
(every job's start, end and stops; the passes that decide nothing may differ)."""

import argparse
import json
import os
import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from side_by_side import add_options, checkout, interleaved, run_snippet  # noqa: E402
from simulate_traces import TRACES  # noqa: E402

from gqa.sim.policies import NAMES  # noqa: E402
from gqa.sim.workload import load_problem  # noqa: E402

GPUS = {"itp": 1196, "alibaba": 12}   # the trace table's clusters at 95% load under `model`

# one replay, run in a fresh process from the sources on its sys.path: prints one JSON line
ONE = r"""
import hashlib, json, resource, sys, time
from gqa.sim import cluster, derive, load_trace, summarize
from gqa.sim.estimates import Estimates
from gqa.sim.policies import run_policy
path, policy, gpus, load, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
work = derive(load_trace(path).jobs, cluster_gpus=gpus, seed=0, load=load, limit=limit or None,
              estimates=Estimates("model"))
began = time.process_time()
result = run_policy(policy, work, cluster(gpus))
took = time.process_time() - began
marks = sorted([(o.submit, 1) for o in result.outcomes] + [(o.start, -1) for o in result.outcomes
                                                           if o.start is not None])
waiting = most = 0
for _, step in marks:
    waiting += step
    most = max(most, waiting)
schedule = hashlib.sha256(repr([(o.start, o.end, o.preemptions) for o in result.outcomes]).encode()).hexdigest()
print(json.dumps({"cpu_s": took, "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "most_waiting": most, "jobs": len(work.jobs), "passes": result.passes,
                  "mean_jct_s": summarize(result)["mean_jct"], "schedule": schedule[:16]}))
"""


def replay(sources: Path, path: str, policy: str, gpus: int, load: float, limit: int) -> dict:
    return run_snippet(ONE, sources, path, policy, gpus, load, limit, what=policy)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=os.environ.get("GQA_TRACES", str(ROOT / "traces")),
                        help="the folder holding the trace files (default: $GQA_TRACES, else traces/)")
    parser.add_argument("--trace", default="itp", choices=sorted(TRACES))
    parser.add_argument("--load", type=float, default=3.0, help="arrival-rate multiplier (default 3)")
    parser.add_argument("--gpus", type=int, default=None, help="the cluster (default: the table's at 95%%)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N jobs (default: all)")
    # gqa-slice only when named: under this overload its slicing churns (a pass at each slice's end),
    # the more the longer it lasts: 29 minutes of CPU for the whole ITP trace
    parser.add_argument("--policies", default="fifo,fifo-easy,multifactor,gqa,sjf-oracle,las",
                        help="comma-separated (default: all but gqa-slice and las-tiers)")
    add_options(parser, "replay")
    args = parser.parse_args()
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in NAMES]
    if unknown or not policies:
        parser.error(f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(NAMES)}")
    if problem := load_problem(args.load):
        parser.error(f"--{problem}")
    if args.limit < 0 or args.rounds < 1 or (args.gpus is not None and args.gpus < 1):
        parser.error("--gpus must be positive, --limit at least 0, --rounds at least 1")
    path = Path(args.traces) / TRACES[args.trace]
    if not path.exists():
        parser.error(f"no {args.trace} trace at {path} (--traces DIR)")
    gpus = args.gpus or GPUS[args.trace]
    rows = []
    with tempfile.TemporaryDirectory(prefix="gqa-backlog-") as tmp:
        try:
            base = checkout(args.against, Path(tmp) / "base") if args.against else None
        except ValueError as exc:
            parser.error(str(exc))
        for policy in policies:
            mine, theirs = interleaved(partial(replay, path=str(path), policy=policy, gpus=gpus, load=args.load,
                                               limit=args.limit), base, args.rounds)
            row = dict(mine[-1], policy=policy, cpu_s=statistics.median(r["cpu_s"] for r in mine))
            if base:
                row["against_cpu_s"] = statistics.median(r["cpu_s"] for r in theirs)
                row["ratio"] = row["cpu_s"] / row["against_cpu_s"] if row["against_cpu_s"] else None
                # the same decisions: every job's starts, end and stops; passes that decide nothing may differ
                row["same_decisions"] = all((r["mean_jct_s"], r["schedule"]) == (t["mean_jct_s"], t["schedule"])
                                            for r, t in zip(mine, theirs))
                row["against_passes"] = theirs[-1]["passes"]
            rows.append(row)
            if args.output == "text":
                print(line(row, args.against), flush=True)
    if args.output == "json":
        print(json.dumps({"trace": args.trace, "gpus": gpus, "load": args.load, "limit": args.limit,
                          "against": args.against, "rounds": args.rounds, "rows": rows}, indent=2))
    return 0


def line(row: dict, against: str | None) -> str:
    text = (f"{row['policy']:<12} {row['jobs']:,} jobs, up to {row['most_waiting']:,} waiting: "
            f"{row['cpu_s']:.1f} s of CPU, {row['max_rss_mib']:.0f} MiB, mean JCT {row['mean_jct_s']:,.0f} s")
    if against:
        same = "same decisions" if row["same_decisions"] else "DIFFERENT decisions"
        if row["passes"] != row["against_passes"]:
            same += f" in {row['passes']:,} passes against {row['against_passes']:,}"
        text += f"; at {against} {row['against_cpu_s']:.1f} s ({row['ratio']:.2f}x), {same}"
    return text


if __name__ == "__main__":
    raise SystemExit(main())
