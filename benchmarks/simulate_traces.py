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
Then the policies (all seven of gqa.sim.policies.NAMES unless --policies)
replay the same workload on that cluster; for a trace that puts its jobs in
several priority tiers, again with every job in one (--priorities). The
headline is each policy's ratio to FIFO's, from one run. `--estimates MODE` picks the wall times
users ask for (as `gqa simulate --estimates`); the cluster is then sized
from the run times those wall times allow, as jobs killed at their limit
offer less.

Traces are read from --traces DIR (default: $GQA_TRACES, else traces/
under the repository root, which git ignores): DIR/itp-2021/raw-traces.tar.gz
and DIR/alibaba-gpu-v2023/openb_pod_list_default.csv, as published (the
README's "Getting the traces" says where from, with each file's sha256); a
trace that is not there is skipped with a message. Team,
user and wall time are derived (see `gqa simulate`'s assumption lines)."""

import argparse
import json
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gqa.scheduling.horizon import BACKFILL_BY, LIMITS  # noqa: E402
from gqa.sim import cluster, derive, load_trace, summarize  # noqa: E402
from gqa.sim.engine import production_eta  # noqa: E402
from gqa.sim.estimates import MODES, Estimates, EstimatesError  # noqa: E402
from gqa.sim.policies import LAS, NAMES, left_out, run_policy  # noqa: E402
from gqa.sim.report import plot_path_problem, save_whole  # noqa: E402
from gqa.sim.workload import PRIORITIES, positive, priorities_choice  # noqa: E402

TRACES = {"itp": "itp-2021/raw-traces.tar.gz", "alibaba": "alibaba-gpu-v2023/openb_pod_list_default.csv"}
WHERE_TO_GET = ("the README's \"Getting the traces\" (under \"Simulating a policy on real traces\") says "
                "where to download each and where to put it")
TARGETS = (0.70, 0.85, 0.95)
QUICK_JOBS = {"itp": 4000, "alibaba": 1500}      # --quick: the first N arrivals (~5 and ~22 days)
ETA_JOBS = 500                                    # arrivals whose ETA is checked per gqa replay
ETA_POLICIES = tuple(p for p in NAMES if p not in LAS)   # those whose replays run the production pass


def offered_gpus(jobs, target: float) -> int:
    """The cluster on which the jobs' offered load (run times, as limited by
    their wall times) is `target`, and on which the largest job fits."""
    span = max(j.submit for j in jobs) - min(j.submit for j in jobs) or 1.0
    demand = sum(j.gpus * min(j.duration, j.wall_time) for j in jobs)
    return max(max(j.gpus for j in jobs), round(demand / span / target))


@lru_cache(maxsize=8)
def _workload(path: str, limit: int | None, seed: int, mode: str, priorities: str = "trace"):
    """The derived workload of one trace under one estimates mode, once per worker process: the
    cluster is at least the largest job, so the workload is the same at every load."""
    return derive(load_trace(path).jobs, cluster_gpus=10**9, seed=seed, limit=limit, estimates=Estimates(mode),
                  priorities=priorities)


def replay(task: tuple) -> dict:
    """One policy on one workload (a separate process: the machine's cores run them side by side).
    Seconds are the process's CPU time, so two replays side by side do not slow each other's figure."""
    path, gpus, policy, limit, seed, mode, priorities, eta_every, backfill_by = task
    work = _workload(path, limit, seed, mode, priorities)
    options = {"eta": production_eta(), "eta_every": eta_every} if eta_every else {}
    began = time.process_time()
    result = run_policy(policy, work, cluster(gpus), backfill_by=backfill_by, **options)
    took = time.process_time() - began
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB
    return {"policy": policy, "summary": summarize(result), "cpu_s": took, "max_rss_mib": rss_mib}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=os.environ.get("GQA_TRACES", str(ROOT / "traces")),
                        help="the folder holding the trace files (default: $GQA_TRACES, else traces/)")
    parser.add_argument("--quick", action="store_true", help="a prefix of each trace")
    parser.add_argument("--only", default=",".join(TRACES), help="itp, alibaba or both")
    parser.add_argument("--targets", default=",".join(f"{t:g}" for t in TARGETS), help="utilisation targets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--estimates", default=",".join(MODES),
                        help=f"the wall times users ask for, any of {', '.join(MODES)} (see gqa simulate --estimates)")
    parser.add_argument("--policies", default=",".join(NAMES), help=f"any of {', '.join(NAMES)}")
    parser.add_argument("--priorities", default=",".join(PRIORITIES),
                        help="trace (the tiers the trace gives), one (every job normal, as fifo and las see "
                             "them) or both; one is replayed only for a trace that gives several tiers")
    parser.add_argument("--eta-jobs", type=int, default=ETA_JOBS,
                        help="gqa's ETA is checked for about this many arrivals per replay (0: none)")
    parser.add_argument("--eta-for", default="gqa",
                        help=f"the policies whose ETAs are checked, any of {', '.join(ETA_POLICIES)} (the las "
                             "replays run no scheduling pass to predict with); the table shows gqa's, the JSON "
                             "each one's eta_* figures")
    parser.add_argument("--backfill-by", default=LIMITS, choices=BACKFILL_BY,
                        help="what gqa and gqa-slice count a job's run as when they backfill: its wall time "
                             "(limits, as the baselines) or its expected run time (predictions)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--plot", help="draw mean JCT against the oracle's per load, mode and trace to this PNG")
    parser.add_argument("-o", "--output", default="table", choices=("table", "json"))
    args = parser.parse_args()
    check_shared(parser, args)
    if args.plot and (problem := plot_path_problem(args.plot)):   # before the table's quarter of an hour
        parser.error(f"--plot {args.plot}: {problem}")
    try:
        targets = targets_of(args.targets)
        modes = [Estimates(m).mode for m in args.estimates.split(",")]
        tiers_asked = [priorities_choice(p) for p in args.priorities.split(",")]
    except (ValueError, EstimatesError) as exc:
        parser.error(str(exc))
    policies = args.policies.split(",")
    unknown = [p for p in policies if p not in NAMES]
    if unknown:
        parser.error(f"unknown policy {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    if twice := next((p for i, p in enumerate(policies) if p in policies[:i]), None):   # replayed twice
        parser.error(f"--policies names {twice} twice")
    wrong = [p for p in args.eta_for.split(",") if p not in ETA_POLICIES]
    if wrong:
        parser.error(f"--eta-for: no ETA for {', '.join(wrong)}; choose from {', '.join(ETA_POLICIES)}")
    began = time.perf_counter()
    rows, tasks = plan_rows(args.traces, args.only.split(","), args.quick, args.seed, modes, tiers_asked, targets,
                            policies, args.eta_jobs, args.backfill_by, tuple(args.eta_for.split(",")))
    if not tasks:
        print(f"no trace to replay: see the messages above; {WHERE_TO_GET}", file=sys.stderr)
        return 2
    run_replays(tasks, args.workers)
    wall = time.perf_counter() - began
    if args.output == "json":
        print(json.dumps({"rows": rows, "wall_s": wall}, indent=2))
    else:
        print_table(rows, wall)
    if args.plot:   # after the table: a picture that cannot be written loses none of the replays
        try:
            plot(rows, args.plot)
        except OSError as exc:
            print(f"{parser.prog}: error: {args.plot}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return 0


def targets_of(text: str) -> list[float]:
    """Utilisation targets, comma-separated: each a finite number above 0 (above 1, an overload)."""
    targets = []
    for t in text.split(","):
        target = positive(t)
        if target is None:
            raise ValueError(f"--targets: each a number above 0 (0.85 for 85%), not {t!r}")
        targets.append(target)
    return targets


def check_shared(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The options the trace benchmarks share, where a script has them: --only names known traces,
    --workers at least 1, --eta-jobs at least 0."""
    unknown = [t for t in getattr(args, "only", "").split(",") if t and t not in TRACES]
    if unknown:
        parser.error(f"unknown trace {', '.join(unknown)}; choose from {', '.join(TRACES)}")
    if getattr(args, "workers", 1) < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if getattr(args, "eta_jobs", 0) < 0:
        parser.error(f"--eta-jobs must be at least 0, got {args.eta_jobs}")


def plan_rows(traces: str, names: list[str], quick: bool, seed: int, modes: list[str], tiers_asked: list[str],
              targets: list[float], policies: list[str], eta_jobs: int,
              backfill_by: str = LIMITS, eta_for: tuple[str, ...] = ("gqa",)) -> tuple[list[dict], list[tuple]]:
    """The table's rows (policies still empty) and the replays that fill them, as (row, task);
    `backfill_by` is gqa's and gqa-slice's (the baselines backfill by limits)."""
    rows, tasks = [], []
    for name in names:
        path = Path(traces) / TRACES[name]
        if not path.exists():
            print(f"skipping {name}: {path} not found (use --traces DIR)", file=sys.stderr)
            continue
        limit = QUICK_JOBS[name] if quick else None
        for priorities in tiers_asked:
            for mode in modes:
                work = _workload(str(path), limit, seed, mode, priorities)
                jobs = work.jobs
                given = len({j.tier for j in _workload(str(path), limit, seed, mode).jobs})
                if priorities == "one" and given < 2:
                    continue   # the trace gives one tier (or none): the rows would be the trace's own
                tiers = given if priorities == "trace" else 1
                eta_every = max(1, len(jobs) // eta_jobs) if eta_jobs else 0
                for target in targets:
                    row = {"trace": name, "estimates": mode, "priorities": priorities, "tiers": tiers,
                           "target": target, "gpus": offered_gpus(jobs, target), "seed": seed,
                           "backfill_by": backfill_by,
                           "jobs": len(jobs), "policies": {}, "cpu_s": {}, "max_rss_mib": {}}
                    rows.append(row)
                    skipped = left_out(work, cluster(row["gpus"]))   # las-tiers where every job is in one tier
                    tasks += [(row, (str(path), row["gpus"], p, limit, seed, mode, priorities,
                                     eta_every if p in eta_for else 0, backfill_by))
                              for p in policies if p not in skipped]
    return rows, tasks


def run_replays(tasks: list[tuple], workers: int) -> None:
    """Every (row, task) replayed, `workers` at a time, its summary put in its row; then each row's goals."""
    # the longest replays first, so no core idles at the end
    tasks = sorted(tasks, key=lambda t: (t[0]["jobs"], not t[1][2].startswith("las")), reverse=True)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [(row, pool.submit(replay, task)) for row, task in tasks]
        for row, future in futures:
            out = future.result()
            row["policies"][out["policy"]] = out["summary"]
            row["cpu_s"][out["policy"]], row["max_rss_mib"][out["policy"]] = out["cpu_s"], out["max_rss_mib"]
            print(f"  {row['trace']} {row['estimates']} {row['priorities']} {row['target']:.0%} seed {row['seed']} "
                  f"{out['policy']}: {out['cpu_s']:.1f} s of CPU", file=sys.stderr)
    for row in {id(row): row for row, _ in tasks}.values():
        row["goals"] = goals(row)


def goals(row: dict) -> dict[str, float | None]:
    """The issue's goals for gqa in one row, as the ratios they are judged by (None: a policy missing)."""
    s = row["policies"]
    gqa = s.get("gqa")

    def ratio(key: str, other: str, mine: str = "gqa") -> float | None:
        ours, theirs = s.get(mine), s.get(other, {}).get(key)
        return ours[key] / theirs if ours and theirs and ours.get(key) is not None else None

    def points(key: str) -> float | None:
        theirs = s.get("fifo-easy", {}).get(key)
        return (gqa[key] - theirs) * 100 if gqa and gqa.get(key) is not None and theirs is not None else None

    # the oracle is not preemptive either: where it loses to las, so must any order without preemption
    oracle_vs_las = s["sjf-oracle"]["mean_jct"] / s["las"]["mean_jct"] if {"sjf-oracle", "las"} <= s.keys() else None
    return {"jct_vs_las": ratio("mean_jct", "las"), "oracle_vs_las": oracle_vs_las,
            "jct_vs_oracle": ratio("mean_jct", "sjf-oracle"),
            # gqa with every tier time-sliced: it preempts as las does, on the same terms
            "slice_jct_vs_las": ratio("mean_jct", "las", "gqa-slice"),
            "slice_jct_vs_oracle": ratio("mean_jct", "sjf-oracle", "gqa-slice"),
            "slice_worst_team_vs_fifo_easy": ratio("max_team_slowdown", "fifo-easy", "gqa-slice"),
            # against las honouring the tiers gqa honours (rows with several tiers): what the tiers
            # cost Tiresias' own rules, beside what they cost gqa
            "jct_vs_las_tiers": ratio("mean_jct", "las-tiers"),
            "slice_jct_vs_las_tiers": ratio("mean_jct", "las-tiers", "gqa-slice"),
            "worst_team_vs_fifo_easy": ratio("max_team_slowdown", "fifo-easy"),
            # utilisation over the makespan, and between the first and last arrival: the first also
            # counts the drain of the few longest jobs, which gqa starts last
            "util_points_vs_fifo_easy": points("utilisation"),
            "util_in_arrivals_points_vs_fifo_easy": points("utilisation_during_arrivals"),
            # the mean error of the waiting jobs' ETAs over their mean wait, and the median error's
            "eta_error_of_wait": gqa.get("eta_error_of_wait") if gqa else None,
            "eta_median_error_of_wait": (gqa["eta_waited_median_abs_error"] / gqa["eta_waited_mean_wait"]
                                         if gqa and gqa.get("eta_waited_median_abs_error") is not None
                                         and gqa.get("eta_waited_mean_wait") else None)}


def print_table(rows: list[dict], wall: float) -> None:
    from gqa.models.units import format_duration

    policies = [p for p in NAMES if any(p in r["policies"] for r in rows)]
    head = f"{'trace':<8}{'estimates':<10}{'tiers':>5}{'load':>5} {'GPUs':>5}" + "".join(f"{p:>12}" for p in policies)
    print("mean JCT per policy; then gqa's goals: JCT / las (<= 1), JCT / sjf-oracle (<= 1.15 with the model's "
          "estimates), worst team's slowdown / fifo-easy's (<= 1), utilisation - fifo-easy's over the makespan "
          "and between the first and last arrival (>= -2 points), the mean and the median ETA error over the mean "
          "wait of those that waited (<= 0.3); gqa-slice's JCT / las and / sjf-oracle; gqa's and "
          "gqa-slice's JCT / las-tiers (las honouring the tiers, where the jobs are in several)")
    print("(oracle/las: the oracle's own JCT over las's; above 1, no order without preemption reaches las; "
          "tiers: the priority tiers the jobs are in, 1 where every job is put in one (--priorities one) "
          "as fifo, fifo-easy and las see them)")
    print(head + f"{'/las':>7}{'/oracle':>8}{'team':>6}{'util':>6}{'arr.':>6}{'ETA':>6}{'med.':>6}{'oracle/las':>11}"
          f"{'slice/las':>10}{'/oracle':>8}{'/las-tiers':>11}{'slice/las-tiers':>16}")
    for r in rows:
        jct = "".join(f"{format_duration(r['policies'][p]['mean_jct']) if p in r['policies'] else '-':>12}"
                      for p in policies)
        g = r["goals"]
        cells = [_x(g["jct_vs_las"]), _x(g["jct_vs_oracle"]), _x(g["worst_team_vs_fifo_easy"]),
                 _pts(g["util_points_vs_fifo_easy"]), _pts(g["util_in_arrivals_points_vs_fifo_easy"]),
                 _x(g["eta_error_of_wait"]), _x(g["eta_median_error_of_wait"]), _x(g["oracle_vs_las"]),
                 _x(g["slice_jct_vs_las"]), _x(g["slice_jct_vs_oracle"]), _x(g["jct_vs_las_tiers"]),
                 _x(g["slice_jct_vs_las_tiers"])]
        print(f"{r['trace']:<8}{r['estimates']:<10}{r['tiers']:>5}{r['target']:>5.0%} {r['gpus']:>5}{jct}"
              f"{cells[0]:>7}{cells[1]:>8}{cells[2]:>6}{cells[3]:>6}{cells[4]:>6}{cells[5]:>6}{cells[6]:>6}"
              f"{cells[7]:>11}{cells[8]:>10}{cells[9]:>8}{cells[10]:>11}{cells[11]:>16}")
    cpu = max((s, r["trace"], p) for r in rows for p, s in r["cpu_s"].items())
    rss = max(m for r in rows for m in r["max_rss_mib"].values())
    print(f"\nslowest replay: {cpu[2]} on {cpu[1]}, {cpu[0]:.1f} s of one core; largest replay process "
          f"{rss:.0f} MiB; {sum(len(r['cpu_s']) for r in rows)} replays in {wall / 60:.1f} min")
    for priorities in PRIORITIES:
        mine = [r for r in rows if r["priorities"] == priorities]
        if not mine:
            continue
        if priorities != "trace":
            print(f"with every job in one tier ({', '.join(sorted({r['trace'] for r in mine}))}):")
        for name, (met, of) in goals_met(mine).items():
            print(f"goal {name}: met in {met} of {of} rows")
        beyond = [r for r in mine if r["goals"]["jct_vs_las"] and r["goals"]["jct_vs_las"] > 1
                  and (r["goals"]["oracle_vs_las"] or 0) > 1]
        print(f"  of the rows where gqa is above las, {len(beyond)} have the oracle above las too")


def _at_most(value: float, limit: float) -> bool:
    return value <= limit


def _at_least(value: float, limit: float) -> bool:
    return value >= limit


# each goal: (its test, its limit)
GOALS = {"jct_vs_las": (_at_most, 1.0), "jct_vs_oracle": (_at_most, 1.15),
         "worst_team_vs_fifo_easy": (_at_most, 1.0),
         "util_points_vs_fifo_easy": (_at_least, -2.0), "util_in_arrivals_points_vs_fifo_easy": (_at_least, -2.0),
         "eta_error_of_wait": (_at_most, 0.3), "eta_median_error_of_wait": (_at_most, 0.3),
         "slice_jct_vs_las": (_at_most, 1.0), "slice_jct_vs_oracle": (_at_most, 1.15),
         "slice_worst_team_vs_fifo_easy": (_at_most, 1.0),
         "jct_vs_las_tiers": (_at_most, 1.0), "slice_jct_vs_las_tiers": (_at_most, 1.0)}


def goal_met(row: dict, name: str) -> bool | None:
    """Whether the row meets the goal; None where it is not judged there (a policy it compares was not
    replayed, as las-tiers in one tier; or the oracle's goal, judged under today's estimates only)."""
    value = row["goals"][name]
    if value is None or (name.endswith("jct_vs_oracle") and row["estimates"] != "model"):
        return None
    test, limit = GOALS[name]
    return test(value, limit)


def goals_met(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """Each goal judged in some of the rows: (rows that meet it, rows where it is judged)."""
    out = {}
    for name in GOALS:
        judged = [met for r in rows if (met := goal_met(r, name)) is not None]
        if judged:
            out[name] = (sum(judged), len(judged))
    return out


def _pts(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def plot(rows: list[dict], path: str) -> None:
    """One panel per trace and estimates mode: each policy's mean JCT over the oracle's, by load."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = sorted({(r["trace"], r["priorities"] != "trace") for r in rows})
    modes = [m for m in MODES if any(r["estimates"] == m for r in rows)]
    fig, axes = plt.subplots(len(traces), len(modes), figsize=(3.2 * len(modes), 2.8 * len(traces)),
                             squeeze=False, sharex=True)
    for i, (trace, one_tier) in enumerate(traces):
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            mine = sorted((r for r in rows if (r["trace"], r["priorities"] != "trace") == (trace, one_tier)
                           and r["estimates"] == mode), key=lambda r: r["target"])
            for policy in NAMES:
                points = [(r["target"] * 100, r["policies"][policy]["mean_jct"] / oracle["mean_jct"])
                          for r in mine if policy in r["policies"] and (oracle := r["policies"].get("sjf-oracle"))]
                if points:
                    # one colour per policy in every panel, whichever policies a panel has
                    ax.plot(*zip(*points), marker="o", label=policy, color=f"C{NAMES.index(policy)}",
                            linewidth=2.4 if policy.startswith("gqa") else 1.2)
            ax.set_yscale("log")
            ax.set_title(f"{trace}{', one tier' if one_tier else ''}, {mode} estimates", fontsize=9)
            if j == 0:
                ax.set_ylabel("mean JCT / sjf-oracle's")
            if i == len(traces) - 1:
                ax.set_xlabel("load (%)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    try:
        save_whole(fig, path, dpi=110)
    finally:
        plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
