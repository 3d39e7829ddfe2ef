"""Where the ETA's error comes from: run-time estimates, or jobs not yet submitted.

    python benchmarks/eta_error_sources.py --traces DIR            # ITP's first 4,000 jobs, 85%, default
    python benchmarks/eta_error_sources.py --traces DIR --jobs 8000 --estimates model -o json
    python benchmarks/eta_error_sources.py --traces DIR --draws 5      # and the drawn rows (13 minutes)

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
correction by those bands of the predicted wait does better. And the one
such correction a queue could make: each band shifted by the median error
of its predictions whose jobs had started when the prediction was made
(the last RECENT of them, once there are ONLINE_LEAST), learned as the
queue runs.

Last, with --draws K, an ETA that treats both unknowns as draws instead of
guesses: the median start over K forward replays, each with every job's run time
drawn from its team's history as it stands at the prediction (a running
job's among the runs that lasted longer than it has run so far), with later
arrivals drawn as a window of --horizon of the past (at a random place in
the week before) shifted to begin now, or both.

It prints the mean and the median absolute error over the mean wait of the
jobs that waited (the issue's figure, goal <= 0.3), and the mean signed
error. With both handed over the error is what the replay itself misses."""

import argparse
import bisect
import json
import math
import random
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
DRAWN = ((True, False, "run times drawn"), (False, True, "later arrivals drawn"), (True, True, "both drawn"))
DRAWS = 0          # forward replays a drawn prediction takes the median of (none: no drawn rows)
RECENT = 500       # the runs per team its history holds (as the replay's, engine.RATIO_SAMPLES)
PAST = 7 * 86400.0   # how far back a drawn window of arrivals may be taken from
STRETCHES = (1.0, 1.25, 1.5, 2.0, 3.0)   # factors a predicted wait is stretched by (the best one is shown)
BAND_FROM = 60.0   # seconds: the first band of predicted waits past "under a minute"; each band doubles
ONLINE_LEAST = 10  # outcomes a band needs before the shift learned as the queue runs moves its predictions


def measure(trace: str, jobs_limit: int, mode: str, target: float, horizon: float, traces: Path,
            draws: int = DRAWS) -> dict:
    work = _workload(str(traces / TRACES[trace]), jobs_limit, 0, mode)
    jobs = sorted(work.jobs, key=lambda j: (j.submit, j.seq))
    submits = [j.submit for j in jobs]
    true = {j.id: min(j.duration, j.wall_time) for j in jobs}   # what each job runs: cut at its wall time
    gpus = offered_gpus(jobs, target)
    rows = []
    eta_every = max(1, len(jobs) // ETA_JOBS)
    production: tuple = ()   # the production replay's outcomes, the jobs of them that waited, their mean wait
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

        result = run_policy("gqa", work, cluster(gpus), eta=eta, eta_every=eta_every)
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
            rows.append(_row("none, each band shifted as learned", waited, mean_wait, horizon,
                             _shifted_as_learned(result.outcomes, waited)))
            production = (result.outcomes, waited, mean_wait)
    if draws:   # the ETA moves no job: the replay's schedule is the same each time, and so is the history
        outcomes, produced, produced_wait = production
        history = History(outcomes)
        for runs, arrivals, name in DRAWN:
            predicted: dict[str, float | None] = {}
            drawn = Drawn(history, jobs, submits, horizon, draws, runs, arrivals)
            run_policy("gqa", work, cluster(gpus), eta=drawn.record(predicted), eta_every=eta_every)
            etas = [o.eta if predicted.get(o.id) is None else predicted[o.id] for o in produced]   # none: production's
            rows.append(_row(f"{name}, median of {draws}", produced, produced_wait, horizon, etas))
    return {"trace": trace, "jobs": len(jobs), "estimates": mode, "target": target, "gpus": gpus,
            "horizon_s": horizon, "rows": rows}


class History:
    """Each team's runs as the replay samples them (a first attempt that ended within its wall
    time: its run time over its limit), by when they ended: what a prediction at `now` may read."""

    def __init__(self, outcomes: list):
        done = sorted((o.end, o.team, min(1.0, (o.end - o.start) / o.wall_time)) for o in outcomes
                      if o.end is not None and o.start is not None and o.attempts == 1 and not o.timed_out
                      and o.wall_time)
        self.ends: dict[str, list[float]] = {}
        self.shares: dict[str, list[float]] = {}
        for end, team, share in done:
            self.ends.setdefault(team, []).append(end)
            self.shares.setdefault(team, []).append(share)

    def at(self, team: str, now: float) -> list[float]:
        """The shares of the team's last RECENT runs ended by `now`."""
        last = bisect.bisect_right(self.ends.get(team, []), now)
        return self.shares.get(team, [])[max(0, last - RECENT):last]


class Drawn:
    """The median start over `draws` forward replays, each handed run times drawn from the history
    (`runs`) and later arrivals drawn from the past (`arrivals`). Seeded by the prediction's time."""

    def __init__(self, history: History, jobs: list, submits: list[float], horizon: float, draws: int,
                 runs: bool, arrivals: bool):
        self.history, self.jobs, self.submits, self.horizon = history, jobs, submits, horizon
        self.draws, self.runs, self.arrivals = draws, runs, arrivals

    def record(self, into: dict):
        def eta(snap, ids, ratios=None, shares=None, longest=None):
            into.update(self.predict(snap, ids, ratios or {}, shares, longest))
            return {}
        return eta

    def predict(self, snap, ids, ratios, shares, longest) -> dict[str, float | None]:
        rng = random.Random(f"{snap.now}")
        starts: dict[str, list[float]] = {i: [] for i in ids}
        for k in range(self.draws):
            runtimes: dict[str, float] = {}
            if self.runs:
                for job in snap.running:
                    self._draw(runtimes, rng, job.id, job.team, job.wall_time, snap.now, snap.now - job.started_at)
                for job in snap.pending:
                    self._draw(runtimes, rng, job.id, job.team, job.wall_time, snap.now)
            coming = self._coming(snap.now, rng, k, ratios, runtimes) if self.arrivals else ()
            drawn = replace(snap, pending=tuple(snap.pending) + coming) if coming else snap
            got = predict_starts(drawn, targets=set(ids), shares=shares, longest=longest, runtimes=runtimes or None)
            for i in ids:
                starts[i].append(math.inf if got.get(i) is None else got[i])
        median = {i: sorted(s)[len(s) // 2] for i, s in starts.items()}
        return {i: None if m == math.inf else m for i, m in median.items()}

    def _draw(self, into: dict, rng: random.Random, job_id: str, team: str, wall_time, now: float,
              ran: float = 0.0) -> None:
        """A run time for the job from its team's history, among the runs longer than it has run."""
        if wall_time:
            longer = [share for share in self.history.at(team, now) if share * wall_time > ran]
            if longer:
                into[job_id] = rng.choice(longer) * wall_time

    def _coming(self, now: float, rng: random.Random, k: int, ratios: dict, runtimes: dict) -> tuple:
        """The jobs submitted within a window of `horizon` taken at a random place in the past week,
        shifted to begin at `now` (each a new job), with run times drawn where `runs`."""
        earliest = max(self.submits[0], now - PAST)
        begin = rng.uniform(earliest, max(earliest, now - self.horizon))
        first = bisect.bisect_left(self.submits, begin)
        last = bisect.bisect_left(self.submits, min(now, begin + self.horizon))
        coming = []
        for j in self.jobs[first:last]:
            at, job_id = j.submit + (now - begin), f"{j.id}~{k}"
            coming.append(PendingJob(
                id=job_id, team=j.team, user=j.user, tier=j.tier, gpus=j.gpus, submitted_at=at, begin=at,
                wall_time=j.wall_time, seq=j.seq + len(self.jobs) * (k + 1), spot=j.spot,
                expected_runtime=expected_runtime(j.wall_time, ratios.get(j.team, 1.0))))
            if self.runs:
                self._draw(runtimes, rng, job_id, j.team, j.wall_time, now)
        return tuple(coming)


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


def _shifted_as_learned(outcomes: list, waited: list, least: int = ONLINE_LEAST,
                        recent: int = RECENT) -> list[float]:
    """Each waiting job's ETA moved by the median error of the predictions of its band of predicted
    waits whose jobs had started by its submission (the last `recent` of them; none moved before the
    band has `least`): what a queue that kept its ETAs could learn from them as it runs."""
    known = sorted((o for o in outcomes if o.eta is not None and o.start is not None), key=lambda o: o.start)
    errors: dict[int, list[float]] = {}
    at, moved = 0, {}
    for o in sorted(waited, key=lambda o: o.submit):
        while at < len(known) and known[at].start <= o.submit:
            k = known[at]
            errors.setdefault(wait_band(k.eta - k.submit), []).append(k.start - k.eta)
            at += 1
        band = errors.get(wait_band(o.eta - o.submit), [])
        moved[o.id] = o.eta + (percentile(band[-recent:], 50) if len(band) >= least else 0.0)
    return [moved[o.id] for o in waited]


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
    parser.add_argument("--draws", type=int, default=DRAWS,
                        help="forward replays a drawn prediction takes the median of (default 0: no drawn rows)")
    parser.add_argument("-o", "--output", default="table", choices=("table", "json"))
    args = parser.parse_args()
    try:
        mode = Estimates(args.estimates).mode
    except EstimatesError as exc:
        parser.error(str(exc))
    if args.jobs < 1 or not 0 < args.target <= 1 or args.horizon <= 0 or args.draws < 0:
        parser.error("--jobs must be at least 1, --target in (0, 1], --horizon above 0, --draws at least 0")
    traces = Path(args.traces)
    if not (traces / TRACES[args.trace]).exists():
        parser.error(f"{traces / TRACES[args.trace]} not found (use --traces DIR)")
    out = measure(args.trace, args.jobs, mode, args.target, args.horizon, traces, args.draws)
    if args.output == "json":
        print(json.dumps(out, indent=2))
        return 0
    print(f"{TITLES[args.trace]}'s first {out['jobs']:,} jobs, {mode} estimates, {args.target:.0%} load "
          f"({out['gpus']} GPUs); later arrivals up to {args.horizon / 3600:g} h ahead")
    print(f"{'the forward replay is handed':<36}{'mean/wait':>10}{'median/wait':>12}{'signed (h)':>11}"
          f"{'waited':>8}{'mean wait (h)':>14}")
    for r in out["rows"]:
        print(f"{r['handed']:<36}{r['eta_error_of_wait']:>10.3f}{r['eta_median_error_of_wait']:>12.3f}"
              f"{r['mean_signed_error_s'] / 3600:>+11.2f}{r['waited']:>8}{r['mean_wait_s'] / 3600:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
