"""Local throughput of gqa against other queues on this machine, in one run.

The workload: trivial 1-GPU jobs (`true`) on 4 GPUs. Measured on every queue
that is here (gqa's local daemon, and where installed and running, Slurm and
task-spooler), one queue at a time, and reported as ratios: the machine is
shared and noisy, so absolute times are printed but the headline is gqa
against its peers measured minutes apart on the same machine.

1. CLI submit rate: N sequential submit commands, jobs/s.
2. Bulk submit: all jobs in one command (an array); task-spooler has no
   arrays, so there it is one command per job.
3. Drain: jobs/s from the first submit to the last job's end.
4. Submit -> start on an idle queue: each job writes `date +%s.%N` as its
   first act; latency is that minus the moment the submit command returned
   (and, for gqa, its own history: RUNNING minus submitted_at).
5. CLI start-up: `gqa --help` against `python -c pass`.

    python benchmarks/local_queue.py                 # 500 jobs, peers that are here
    python benchmarks/local_queue.py --quick --peers none
    python benchmarks/local_queue.py -o json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import Gqa, Unavailable, peers, run, shell_loop  # noqa: E402

SLURM_TUNED_REFERENCE = 4.41  # jobs/s, tuned single-node Slurm draining 500 trivial jobs on 4 GPUs
GOAL_DRAIN_VS_SLURM = 10.0
AIM_DRAIN_VS_TSP = 0.5
GOAL_START_S, AIM_START_S = 0.1, 0.01
GOAL_CLI_SUBMIT = 20.0
GOAL_ARRAY_S = 1.0

# key, label, unit, which way is better
ROWS = [
    ("cli_submit_rate", "CLI submit, one command per job", "jobs/s", "high"),
    ("bulk_submit_s", "submit all jobs in one go", "s", "low"),
    ("drain_rate", "drain: first submit -> last end", "jobs/s", "high"),
    ("call_start_p50", "submit invoked -> job runs, p50", "s", "low"),
    ("call_start_p95", "submit invoked -> job runs, p95", "s", "low"),
    ("start_p50", "submit returned -> job runs, p50 (1)", "s", "low"),
    ("start_p95", "submit returned -> job runs, p95 (1)", "s", "low"),
    ("recorded_start_p50", "gqa: job recorded -> job runs, p50", "s", "low"),
    ("recorded_start_p95", "gqa: job recorded -> job runs, p95", "s", "low"),
    ("queue_start_p50", "gqa history: submitted -> RUNNING, p50", "s", "low"),
    ("queue_start_p95", "gqa history: submitted -> RUNNING, p95", "s", "low"),
    ("daemon_drain_rate", "gqa history: first submitted -> last end", "jobs/s", "high"),
]


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def mean_wall(argv: list[str], runs: int, env: dict | None = None) -> float:
    total = 0.0
    for _ in range(runs):
        t0 = time.perf_counter()
        run(argv, env=env)
        total += time.perf_counter() - t0
    return total / runs


# -- measurements --------------------------------------------------------------------

def measure_startup(gqa: Gqa, runs: int) -> dict:
    """Mean wall time of `gqa --help` and of a bare interpreter, one warm-up run each."""
    mean_wall([gqa.cli, "--help"], 1, gqa.env)
    mean_wall([sys.executable, "-c", "pass"], 1, gqa.env)
    cli = mean_wall([gqa.cli, "--help"], runs, gqa.env)
    python = mean_wall([sys.executable, "-c", "pass"], runs, gqa.env)
    return {"gqa_help_s": cli, "python_pass_s": python, "ratio": cli / python, "runs": runs}


def measure_start_latency(q, samples: int, scratch: Path) -> dict:
    """One job at a time on an idle queue; each job stamps the time it began."""
    after_return, after_call, stamps = [], [], {}
    for i in range(samples):
        mark = scratch / f"{q.name}-start-{i}"
        argv = q.submit_argv(["sh", "-c", f"date +%s.%N > {mark}.tmp && mv {mark}.tmp {mark}"])
        called = time.time()
        out = run(argv, env=q.env)
        returned = time.time()
        job = q.job_id(out)
        deadline = time.monotonic() + 120
        while not mark.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{q.name}: job {job} did not start within 120 s")
            time.sleep(0.001)
        stamps[job] = began = float(mark.read_text())
        after_return.append(began - returned)  # < 0: it ran before the command returned
        after_call.append(began - called)
        q.wait_idle()
    return {"start_p50": percentile(after_return, 0.5), "start_p95": percentile(after_return, 0.95),
            "call_start_p50": percentile(after_call, 0.5), "call_start_p95": percentile(after_call, 0.95),
            "start_samples": samples, "stamps": stamps}


def measure_cli_submit(q, n: int) -> dict:
    """n submit commands back to back in a shell loop, the way a user's script would queue jobs."""
    t0 = time.perf_counter()
    out = run(["sh", "-c", shell_loop(n, q.submit_argv(["true"]))], env=q.env, timeout=600)
    elapsed = time.perf_counter() - t0
    for line in out.splitlines():
        q.job_id(line)
    q.wait_idle()
    return {"cli_submit_rate": n / elapsed, "cli_submit_s": elapsed, "cli_submits": n}


def measure_drain(q, n: int) -> dict:
    """n trivial jobs submitted in one go; the clock runs from the submit to the last job's end."""
    t0 = time.time()
    how, submit_s = q.submit_many(n)
    end = q.wait_idle()
    return {"bulk_how": how, "bulk_submit_s": submit_s, "drain_s": end - t0, "drain_rate": n / (end - t0),
            "jobs": n}


def median_of(runs: list[dict]) -> dict:
    """Each figure's median over the repeated runs; every run's rates kept as `*_runs`."""
    out = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, float):
            out[key] = statistics.median(r[key] for r in runs)
    for key in ("cli_submit_rate", "drain_rate"):
        out[key + "_runs"] = [r[key] for r in runs]
    return out


def gqa_history(gqa: Gqa, result: dict) -> dict:
    """gqa's own view from its job history: queue latency without the CLI, and the daemon's drain."""
    records = {r.id: r for r in gqa.records()}
    waits, lags = [], []
    for job_id, began in result["stamps"].items():
        job = records[job_id]
        waits.append(next(t.at for t in job.history if t.state.value == "RUNNING") - job.submitted_at)
        lags.append(began - job.submitted_at)
    arrays: dict[str, list] = {}
    for r in records.values():
        if r.array_index is not None:
            arrays.setdefault(r.group, []).append(r)
    drains = [len(a) / (max(r.ended_at for r in a) - min(r.submitted_at for r in a)) for a in arrays.values()]
    return {"queue_start_p50": percentile(waits, 0.5), "queue_start_p95": percentile(waits, 0.95),
            "recorded_start_p50": percentile(lags, 0.5), "recorded_start_p95": percentile(lags, 0.95),
            "daemon_drain_rate": statistics.median(drains)}


def measure_queue(q, args, scratch: Path) -> dict:
    say(f"== {q.label}")
    try:
        q.start()
        out = {"label": q.label}
        say(f"   submit -> start, {args.samples} jobs one at a time on an idle queue")
        out.update(measure_start_latency(q, args.samples, scratch))
        runs = []
        for i in range(args.repeat):
            say(f"   run {i + 1}/{args.repeat}: CLI submit, {args.submits} commands; drain, {args.jobs} jobs")
            runs.append(measure_cli_submit(q, args.submits) | measure_drain(q, args.jobs))
        out.update(median_of(runs))
        if q.name.startswith("gqa"):
            out.update(gqa_history(q, out))
        return out
    finally:
        q.stop()


# -- report --------------------------------------------------------------------------

def gain(gqa_value: float | None, peer_value: float | None, better: str) -> float | None:
    """How many times better gqa is than the peer (> 1: gqa better)."""
    if gqa_value is None or peer_value is None:
        return None
    num, den = (gqa_value, peer_value) if better == "high" else (peer_value, gqa_value)
    return num / den if num > 0 and den > 0 else None  # a negative time (started early) has no ratio


def ratios(results: dict) -> dict:
    base = results["gqa"]
    return {name: {key: gain(base.get(key), res.get(key), better) for key, _, _, better in ROWS}
            for name, res in results.items() if name != "gqa"}


def goals(results: dict, startup: dict, jobs: int) -> list[dict]:
    g = results["gqa"]
    slurm = results.get("slurm")
    if slurm and "tuned" in slurm["label"]:
        slurm_rate, source = slurm["drain_rate"], "measured"
    else:
        slurm_rate, source = SLURM_TUNED_REFERENCE, "reference figure"
    out = [
        {"goal": f"drain >= {GOAL_DRAIN_VS_SLURM:g}x tuned Slurm", "value": g["drain_rate"] / slurm_rate,
         "detail": f"{g['drain_rate']:.1f} jobs/s vs {slurm_rate:.2f} ({source})",
         "met": g["drain_rate"] / slurm_rate >= GOAL_DRAIN_VS_SLURM},
    ]
    if "tsp" in results:
        r = g["drain_rate"] / results["tsp"]["drain_rate"]
        out.append({"goal": f"aim: drain >= {AIM_DRAIN_VS_TSP:g}x task-spooler", "value": r,
                    "detail": f"{g['drain_rate']:.1f} vs {results['tsp']['drain_rate']:.1f} jobs/s",
                    "met": r >= AIM_DRAIN_VS_TSP})
    out += [
        {"goal": f"job runs within {GOAL_START_S:g} s of being recorded (p95)", "value": g["recorded_start_p95"],
         "detail": f"p50 {g['recorded_start_p50'] * 1e3:.1f} ms; after the submit command returned: "
                   f"p50 {g['start_p50'] * 1e3:.1f} ms, p95 {g['start_p95'] * 1e3:.1f} ms",
         "met": g["recorded_start_p95"] <= GOAL_START_S},
        {"goal": f"aim: within {AIM_START_S * 1e3:g} ms (p50)", "value": g["recorded_start_p50"],
         "detail": f"p50 {g['recorded_start_p50'] * 1e3:.1f} ms", "met": g["recorded_start_p50"] <= AIM_START_S},
        {"goal": f"CLI submit >= {GOAL_CLI_SUBMIT:g} jobs/s", "value": g["cli_submit_rate"],
         "detail": f"{g['cli_submit_rate']:.1f} jobs/s", "met": g["cli_submit_rate"] >= GOAL_CLI_SUBMIT},
        {"goal": f"array of {jobs} submitted < {GOAL_ARRAY_S:g} s", "value": g["bulk_submit_s"],
         "detail": f"{g['bulk_submit_s']:.3f} s", "met": g["bulk_submit_s"] < GOAL_ARRAY_S},
        {"goal": "CLI start-up, gqa --help / python -c pass", "value": startup["ratio"],
         "detail": f"{startup['gqa_help_s'] * 1e3:.0f} ms / {startup['python_pass_s'] * 1e3:.0f} ms", "met": None},
    ]
    return out


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1e3:.1f} ms" if abs(value) < 1 else f"{value:.2f} s"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def print_report(report: dict) -> None:
    results, gains = report["queues"], report["ratios"]
    names = list(results)
    print(f"\ngqa local queue benchmark, {report['date']}: {report['jobs']} trivial 1-GPU jobs on "
          f"{report['gpus']} GPUs; {report['cpus']} CPUs, load {report['load']}; submit and drain: "
          f"median of {report['repeat']} runs")
    print("\nratios, gqa vs peer (x > 1: gqa better)")
    print(f"  {'metric':<50}" + "".join(f"{'vs ' + results[n]['label']:>22}" for n in gains))
    for key, label, _unit, _ in ROWS:
        if any(gains[n].get(key) is not None for n in gains):
            print(f"  {label:<50}" + "".join(f"{_x(gains[n].get(key)):>22}" for n in gains))
    if not gains:
        print("  (no peers measured)")
    print("\nabsolute values (noisy; compare within a column only across runs)")
    print(f"  {'metric':<42} {'unit':>6}  " + "".join(f"{results[n]['label']:>22}" for n in names))
    for key, label, unit, _ in ROWS:
        if any(results[n].get(key) is not None for n in names):
            print(f"  {label:<42} {unit:>6}  " + "".join(f"{fmt(results[n].get(key), unit):>22}" for n in names))
    print("  (1) negative: the job was already running when its submit command returned")
    for key in ("cli_submit_rate", "drain_rate"):
        print(f"  {key.replace('_', ' ')}, every run: " + "; ".join(
            f"{results[n]['label']} " + ", ".join(f"{v:.3g}" for v in results[n][key + "_runs"]) for n in names))
    print("  submit all jobs in one go: " + ", ".join(f"{results[n]['label']} {results[n]['bulk_how']}" for n in names))
    print(f"  CLI start-up: gqa --help {report['startup']['gqa_help_s'] * 1e3:.0f} ms, python -c pass "
          f"{report['startup']['python_pass_s'] * 1e3:.0f} ms (mean of {report['startup']['runs']})")
    for note in report["notes"]:
        print(f"  note: {note}")
    print("\ngoals (gqa)")
    for g in report["goals"]:
        status = "info" if g["met"] is None else "MET" if g["met"] else "NOT MET"
        value = f"{g['value']:.3g}"
        print(f"  {status:<8} {g['goal']:<48} {value:>8}  {g['detail']}")
    for name, why in report["skipped"].items():
        print(f"\nskipped {name}: {why}")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


# -- main ----------------------------------------------------------------------------

def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=None, help="jobs to drain (500; 50 with --quick)")
    p.add_argument("--gpus", type=int, default=4, help="GPUs / slots on every queue (4)")
    p.add_argument("--submits", type=int, default=None, help="sequential CLI submits (50; 10 with --quick)")
    p.add_argument("--samples", type=int, default=None, help="submit -> start samples (30; 10 with --quick)")
    p.add_argument("--repeat", type=int, default=None, help="runs of the submit and drain measurements; "
                   "the median is reported (3; 1 with --quick)")
    p.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    p.add_argument("--peers", default="auto", help="auto, none, slurm, tsp, or a comma list (auto)")
    p.add_argument("--against", default=None, metavar="REV",
                   help="also measure gqa as it was at git revision REV, in the same run (e.g. HEAD~1)")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = p.parse_args(argv)
    if args.against:
        args.peers = ",".join(filter(None, [("" if args.peers == "none" else "slurm,tsp" if args.peers == "auto"
                                             else args.peers), "gqa@" + args.against]))
    args.jobs = args.jobs or (50 if args.quick else 500)
    args.submits = args.submits or (10 if args.quick else 50)
    args.samples = args.samples or (10 if args.quick else 30)
    args.repeat = args.repeat or (1 if args.quick else 3)
    if min(args.jobs, args.gpus, args.submits, args.samples, args.repeat) < 1:
        p.error("counts must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="gqa-bench-") as tmp:
        scratch = Path(tmp)
        gqa = Gqa(scratch / "home", args.gpus)
        others, skipped = peers(args.peers, scratch, args.gpus, say)
        say(f"== CLI start-up, {3 if args.quick else 10} runs each")
        startup = measure_startup(gqa, 3 if args.quick else 10)
        results = {"gqa": measure_queue(gqa, args, scratch)}
        for q in others:
            try:
                results[q.name] = measure_queue(q, args, scratch)
            except (Unavailable, RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
                skipped[q.name] = str(exc)
                say(f"skipping {q.name}: {exc}")
    for res in results.values():
        res.pop("stamps", None)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "jobs": args.jobs, "repeat": args.repeat, "gpus": args.gpus,
        "cpus": os.cpu_count(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()), "startup": startup, "queues": results,
        "ratios": ratios(results), "goals": goals(results, startup, args.jobs), "skipped": skipped,
        "peer_config": {q.name: getattr(q, "params", "") for q in others},
        "notes": [n for n in [gqa.note] if n],
    }
    if args.output == "json":
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
