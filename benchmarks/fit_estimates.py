"""Fit `gqa simulate --estimates fitted` to a log that records, per job, both the
time limit the user asked for and the time the job used.

    python benchmarks/fit_estimates.py PATH.swf [--modal 8]
    python benchmarks/fit_estimates.py sacct.txt            # a Slurm site's own history
    python benchmarks/fit_estimates.py history.csv          # gqa's own: gqa history -n 0 -o csv

PATH is a Standard Workload Format log (Parallel Workloads Archive style:
field 4 run time, field 9 requested time, in seconds; ';' lines are comments),
or Slurm's accounting or gqa's history as `gqa simulate` reads them (`sacct
-a -X -P -o JobID,Submit,Eligible,Start,End,ElapsedRaw,AllocTRES,ReqTRES,
TimelimitRaw,...`; `gqa history -n 0 -o csv`): the GPU jobs that ran, each
its run time and the time limit it asked.
The figures printed are the constants of gqa/sim/estimates.py (FITTED_*):

- the share of jobs killed at their limit: used >= requested (the log cannot
  say by how much they under-asked: they were stopped there);
- the share asking the log's largest request (its partition maximum);
- the most common requests (modal values) and the share asking each;
- for the rest (neither killed nor at the maximum) that ran SHORT seconds or
  more, requested / used as a lognormal: the median and sigma of its logarithm.
  Those that ended sooner mostly failed early: what they asked says nothing of
  their run (their median ratio is printed to show it).

Jobs without both times (-1 or 0) are left out and counted."""

import argparse
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gqa.sim.queue_history import is_queue_history  # noqa: E402
from gqa.sim.sacct import is_sacct  # noqa: E402
from gqa.sim.trace import TraceError, load_trace  # noqa: E402

SHORT = 600.0   # seconds: runs shorter than this are mostly early failures


def read_swf(path: str) -> tuple[list[tuple[float, float]], int]:
    """(used, requested) seconds per job with both, and how many jobs lacked one."""
    pairs, skipped = [], 0
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if not fields or line.lstrip().startswith(";"):
                continue
            if len(fields) < 9:
                skipped += 1
                continue
            try:
                used, asked = float(fields[3]), float(fields[8])
            except ValueError:
                raise ValueError(f"line {number}: fields 4 and 9 are not numbers, as SWF's run and requested "
                                 f"times are: {fields[3]!r}, {fields[8]!r}") from None
            if used > 0 and asked > 0:
                pairs.append((used, asked))
            else:
                skipped += 1
    return pairs, skipped


def read_trace(path: str) -> tuple[list[tuple[float, float]], int]:
    """(used, requested) seconds per GPU job that ran with a limit of its own, and how many had none:
    a Slurm dump or gqa's history, as gqa simulate reads them."""
    jobs = load_trace(path).jobs
    pairs = [(j.duration, j.wall_time) for j in jobs if j.wall_time]
    return pairs, len(jobs) - len(pairs)


def read_pairs(path: str) -> tuple[list[tuple[float, float]], int]:
    with open(path, "rb") as f:
        first = f.readline(65536).decode("utf-8-sig", errors="replace")
    return read_trace(path) if is_sacct(first) or is_queue_history(first) else read_swf(path)


def fit(pairs: list[tuple[float, float]], modal: int) -> dict:
    n = len(pairs)
    largest = max(asked for _, asked in pairs)
    killed = [p for p in pairs if p[0] >= p[1]]
    at_max = [p for p in pairs if p[1] == largest and p[0] < p[1]]
    rest = [math.log(asked / used) for used, asked in pairs if SHORT <= used < asked < largest]
    short = [math.log(asked / used) for used, asked in pairs if used < SHORT and used < asked < largest]
    counts = Counter(asked for _, asked in pairs).most_common(modal)
    ratios = sorted(asked / used for used, asked in pairs)
    return {
        "jobs": n,
        "killed_share": len(killed) / n,
        "max_request": largest,
        "max_share": len(at_max) / n,
        "modal": [(value, count / n) for value, count in counts],
        "modal_share": sum(count for _, count in counts) / n,
        "rest_jobs": len(rest),
        "rest_median": math.exp(statistics.median(rest)) if rest else None,
        "rest_sigma": statistics.pstdev(rest) if rest else None,
        "short_jobs": len(short),
        "short_median": math.exp(statistics.median(short)) if short else None,
        "median_asked_over_used": ratios[n // 2],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="an SWF log with run time (field 4) and requested time (field 9), or "
                                     "Slurm's accounting or gqa history -o csv, as gqa simulate reads them")
    parser.add_argument("--modal", type=int, default=8, help="how many of the commonest requests to keep")
    args = parser.parse_args()
    try:
        pairs, skipped = read_pairs(args.path)
    except OSError as exc:
        print(f"{args.path}: {exc.strerror}", file=sys.stderr)
        return 2
    except (TraceError, ValueError) as exc:   # a sacct row, or an SWF field, that is not a number
        print(str(exc) if isinstance(exc, TraceError) else f"{args.path}: {exc}", file=sys.stderr)
        return 2
    if not pairs:
        print(f"{args.path}: no job with both a run time and a requested time", file=sys.stderr)
        return 2
    got = fit(pairs, args.modal)
    print(f"{got['jobs']} jobs with both times ({skipped} without)")
    print(f"killed at their limit (used >= requested): {got['killed_share']:.3f}")
    print(f"asking the largest request ({got['max_request'] / 3600:g} h): {got['max_share']:.3f}")
    print(f"the {args.modal} commonest requests cover {got['modal_share']:.3f}:")
    for value, share in got["modal"]:
        print(f"  {value:>8.0f} s ({value / 3600:.2f} h): {share:.3f}")
    if got["rest_jobs"]:
        print(f"the other {got['rest_jobs']} that ran {SHORT:g} s or more: requested/used lognormal, "
              f"median {got['rest_median']:.2f}x, sigma {got['rest_sigma']:.2f}")
    else:
        print(f"no other job ran {SHORT:g} s or more: no lognormal to fit")
    if got["short_jobs"]:
        print(f"the other {got['short_jobs']} ran less than {SHORT:g} s: median requested/used "
              f"{got['short_median']:.1f}x")
    print(f"median requested/used over all jobs: {got['median_asked_over_used']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
