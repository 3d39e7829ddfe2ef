"""Where the ETA's error comes from: run-time estimates, or jobs not yet submitted.

    python benchmarks/eta_error_sources.py --traces DIR            # ITP's first 4,000 jobs, 85%, default
    python benchmarks/eta_error_sources.py --traces DIR --jobs 8000 --estimates model -o json

gqa's ETA at submission runs the production pass forward over what it can
see: the running and queued jobs, ending at their expected run times. Two
things it cannot see make it wrong: how long each job will really run, and
the jobs submitted after it that overtake it. This replays gqa on a prefix
of a trace (ITP unless --trace; the cluster sized as
benchmarks/simulate_traces.py sizes it) four times, each with an ETA for
about 500 arrivals, and hands the forward replay what it cannot know:

- as in production;
- each job's true run time (it still ranks by its estimate, as the pass does);
- every job submitted within --horizon after the prediction, at its real
  submit time (a --begin the replay waits for), with its real wall time;
- both.

And, from the first replay's predictions, two corrections chosen knowing
the outcomes, so that no correction of their kind does better: each
predicted wait stretched by the one factor (of STRETCHES) that fits the
outcomes best, and each band of predicted waits (under a minute, then
doubling: 1-2 minutes, 2-4, ...) shifted by its own best shift, the median
of its errors, which is the shift with the least absolute error: no
correction by those bands of the predicted wait does better.

It prints the mean and the median absolute error over the mean wait of the
jobs that waited (the issue's figure, goal <= 0.3), and the mean signed
error. With both handed over the error is what the replay itself misses."""

import argparse
import bisect
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from simulate_traces import TRACES, _workload, offered_gpus  # noqa: E402

from gqa.scheduling import PendingJob  # noqa: E402
from gqa.scheduling.eta import expected_runtime, predict_starts  # noqa: E402
from gqa.sim import cluster, summarize  # noqa: E402
from gqa.models.stats import percentile  # noqa: E402
from gqa.sim.estimates import MODES, Estimates, EstimatesError  # noqa: E402
from gqa.sim.metrics import mean  # noqa: E402
from gqa.sim.policies import run_policy  # noqa: E402

ETA_JOBS = 500
TITLES = {"itp": "ITP", "alibaba": "Alibaba"}
VARIANTS = ((False, False, "as in production"), (True, False, "true run times"),
            (False, True, "later arrivals"), (True, True, "both"))
STRETCHES = (1.0, 1.25, 1.5, 2.0, 3.0)   # factors a predicted wait is stretched by (the best one is shown)
BAND_FROM = 60.0   # seconds: the first band of predicted waits past "under a minute"; each band doubles


def measure(trace: str, jobs_limit: int, mode: str, target: float, horizon: float, traces: Path) -> dict:
    work = _workload(str(traces / TRACES[trace]), jobs_limit, 0, mode)
    jobs = sorted(work.jobs, key=lambda j: (j.submit, j.seq))
    submits = [j.submit for j in jobs]
    true = {j.id: min(j.duration, j.wall_time) for j in jobs}   # what each job runs: cut at its wall time
    gpus = offered_gpus(jobs, target)
    rows = []
    for exact, later, name in VARIANTS:
        def eta(snap, ids, ratios=None, shares=None, longest=None, exact=exact, later=later):
            if later:
                first, last = bisect.bisect_right(submits, snap.now), bisect.bisect_right(submits, snap.now + horizon)
                coming = tuple(PendingJob(
                    id=j.id, team=j.team, user=j.user, tier=j.tier, gpus=j.gpus, submitted_at=j.submit,
                    begin=j.submit, wall_time=j.wall_time, seq=j.seq, spot=j.spot,
                    expected_runtime=expected_runtime(j.wall_time, (ratios or {}).get(j.team, 1.0)))
                    for j in jobs[first:last])
                snap = replace(snap, pending=tuple(snap.pending) + coming)
            return predict_starts(snap, targets=set(ids), shares=shares, longest=longest,
                                  runtimes=true if exact else None)

        result = run_policy("gqa", work, cluster(gpus), eta=eta, eta_every=max(1, len(jobs) // ETA_JOBS))
        s = summarize(result)
        waited = [o for o in result.outcomes if o.eta is not None and o.start is not None and o.start > o.submit]
        mean_wait = s["eta_waited_mean_wait"]
        if not waited or not mean_wait:
            raise SystemExit(f"no job with an ETA waited at {target:.0%} load: nothing to measure (a higher --target?)")
        rows.append(_row(name, waited, mean_wait, horizon, [o.eta for o in waited]))
        if not exact and not later:   # the best constant stretch of what production predicts
            stretched = {k: [o.submit + k * (o.eta - o.submit) for o in waited] for k in STRETCHES}
            best = min(STRETCHES, key=lambda k: sum(abs(e - o.start) for e, o in zip(stretched[k], waited)))
            rows.append(_row(f"none, waits stretched x{best:g}", waited, mean_wait, horizon, stretched[best]))
            rows.append(_row("none, each band shifted best", waited, mean_wait, horizon, _shifted_by_band(waited)))
    return {"trace": trace, "jobs": len(jobs), "estimates": mode, "target": target, "gpus": gpus,
            "horizon_s": horizon, "rows": rows}


def wait_band(predicted: float) -> int:
    """0 for a predicted wait under BAND_FROM, then 1, 2, ... for each doubling past it."""
    return 0 if predicted < BAND_FROM else 1 + math.floor(math.log2(predicted / BAND_FROM))


def _shifted_by_band(waited: list) -> list[float]:
    """Each job's ETA moved by the median error of its band of predicted waits: the one shift per
    band with the least absolute error there, chosen knowing the starts."""
    bands: dict[int, list] = {}
    for o in waited:
        bands.setdefault(wait_band(o.eta - o.submit), []).append(o.start - o.eta)
    shift = {band: percentile(errors, 50) for band, errors in bands.items()}
    return [o.eta + shift[wait_band(o.eta - o.submit)] for o in waited]


def _row(name: str, waited: list, mean_wait: float, horizon: float, etas: list[float]) -> dict:
    """The errors of `etas` (one per job of `waited`, in order) over the mean wait, as the
    replay's summary measures them."""
    errors = [abs(e - o.start) for e, o in zip(etas, waited)]
    return {"handed": name, "eta_error_of_wait": mean(errors) / mean_wait,
            "eta_median_error_of_wait": percentile(errors, 50) / mean_wait,
            "mean_signed_error_s": sum(e - o.start for e, o in zip(etas, waited)) / len(waited),
            "waited": len(waited), "mean_wait_s": mean_wait,
            "waits_beyond_horizon": sum(1 for o in waited if o.start - o.submit > horizon)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=str(ROOT / "traces"), help="the folder holding the trace files")
    parser.add_argument("--trace", default="itp", choices=tuple(TRACES), help="which trace (default: itp)")
    parser.add_argument("--jobs", type=int, default=4000, help="the trace's first N arrivals")
    parser.add_argument("--estimates", default="default", help=f"one of {', '.join(MODES)}")
    parser.add_argument("--target", type=float, default=0.85, help="utilisation the cluster is sized for")
    parser.add_argument("--horizon", type=float, default=48 * 3600.0,
                        help="seconds of later arrivals handed over (longer than the longest wait: all that matter)")
    parser.add_argument("-o", "--output", default="table", choices=("table", "json"))
    args = parser.parse_args()
    try:
        mode = Estimates(args.estimates).mode
    except EstimatesError as exc:
        parser.error(str(exc))
    if args.jobs < 1 or not 0 < args.target <= 1 or args.horizon <= 0:
        parser.error("--jobs must be at least 1, --target in (0, 1], --horizon above 0")
    traces = Path(args.traces)
    if not (traces / TRACES[args.trace]).exists():
        parser.error(f"{traces / TRACES[args.trace]} not found (use --traces DIR)")
    out = measure(args.trace, args.jobs, mode, args.target, args.horizon, traces)
    if args.output == "json":
        print(json.dumps(out, indent=2))
        return 0
    print(f"{TITLES[args.trace]}'s first {out['jobs']:,} jobs, {mode} estimates, {args.target:.0%} load "
          f"({out['gpus']} GPUs); later arrivals up to {args.horizon / 3600:g} h ahead")
    print(f"{'the forward replay is handed':<30}{'mean/wait':>10}{'median/wait':>12}{'signed (h)':>11}"
          f"{'waited':>8}{'mean wait (h)':>14}")
    for r in out["rows"]:
        print(f"{r['handed']:<30}{r['eta_error_of_wait']:>10.3f}{r['eta_median_error_of_wait']:>12.3f}"
              f"{r['mean_signed_error_s'] / 3600:>+11.2f}{r['waited']:>8}{r['mean_wait_s'] / 3600:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
