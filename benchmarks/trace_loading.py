"""How long a trace takes to read, as Slurm's accounting and as the generic CSV, side by side.

    python benchmarks/trace_loading.py                 # 300,000 jobs, 3 rounds
    python benchmarks/trace_loading.py --jobs 1000000 --rounds 1

Writes the same jobs both ways (a sacct -X -P dump with the columns the README names, and the CSV
with id, team, priority, wall time, user and name), then reads each in a fresh process, the two
interleaved, --rounds times: the median CPU seconds and the peak memory of each, and their ratio.
The jobs are drawn from a seed: 1 to 8 GPUs, runs of a second to 10 hours, limits of 1, 4 or 24
hours, four accounts, fifty users."""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = "JobID|Submit|Eligible|Start|End|ElapsedRaw|AllocTRES|ReqTRES|TimelimitRaw|Account|QOS|User|JobName|State"
READ = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from gqa.sim.trace import load_trace
began = time.process_time()
trace = load_trace(sys.argv[1])
print(json.dumps({"cpu_s": time.process_time() - began, "jobs": len(trace.jobs), "format": trace.format,
                  "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_both(folder: Path, jobs: int, seed: int = 1) -> tuple[Path, Path]:
    rng, origin = random.Random(seed), datetime(2026, 11, 1)
    dump, table = folder / "sacct.txt", folder / "jobs.csv"
    with dump.open("w") as d, table.open("w") as c:
        d.write(HEADER + "\n")
        c.write("id,submit_time,duration,gpus,team,priority,wall_time,user,name\n")
        for i in range(jobs):
            submit = origin + timedelta(seconds=30 * i)
            start = submit + timedelta(seconds=rng.randint(0, 600))
            ran, gpus, limit = rng.randint(1, 36_000), rng.choice((1, 1, 2, 4, 8)), rng.choice((60, 240, 1440))
            team, user, name = f"team{i % 4}", f"u{i % 50}", f"job{i % 100}"
            at = [t.strftime("%Y-%m-%dT%H:%M:%S") for t in (submit, start, start + timedelta(seconds=ran))]
            d.write(f"{i}|{at[0]}|{at[0]}|{at[1]}|{at[2]}|{ran}|billing={gpus},cpu={4 * gpus},gres/gpu={gpus},"
                    f"mem=32G,node=1|cpu={4 * gpus},gres/gpu={gpus},mem=32G,node=1|{limit}|{team}|normal|{user}|"
                    f"{name}|COMPLETED\n")
            c.write(f"{i},{at[0]},{ran},{gpus},{team},normal,{limit * 60},{user},{name}\n")
    return dump, table


def read(path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", READ, str(path), str(ROOT)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-o", "--output", default="text", choices=("text", "json"))
    args = parser.parse_args()
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds must be at least 1")
    with tempfile.TemporaryDirectory(prefix="gqa-traces-") as tmp:
        dump, table = write_both(Path(tmp), args.jobs)
        runs: dict[str, list[dict]] = {"sacct": [], "csv": []}
        for _ in range(args.rounds):
            runs["sacct"].append(read(dump))
            runs["csv"].append(read(table))
        sizes = {"sacct": dump.stat().st_size, "csv": table.stat().st_size}
    out = {f: {"cpu_s": statistics.median(r["cpu_s"] for r in rs), "max_rss_mib": max(r["max_rss_mib"] for r in rs),
               "jobs": rs[0]["jobs"], "mib": sizes[f] / 2**20} for f, rs in runs.items()}
    ratio = out["sacct"]["cpu_s"] / out["csv"]["cpu_s"]
    if args.output == "json":
        print(json.dumps({"jobs": args.jobs, "rounds": args.rounds, "formats": out, "ratio": ratio}, indent=2))
        return 0
    for name, row in out.items():
        print(f"{name:<6} {row['jobs']:,} jobs from {row['mib']:.0f} MiB: {row['cpu_s']:.1f} s of CPU, "
              f"{row['max_rss_mib']:.0f} MiB at most")
    print(f"sacct over csv: {ratio:.2f}x (median of {args.rounds} rounds, interleaved)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
