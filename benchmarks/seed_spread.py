"""How much of the table is the seed's: simulate_traces.py's rows under several seeds.

    python benchmarks/seed_spread.py --traces DIR                     # Alibaba, seeds 0-9
    python benchmarks/seed_spread.py --traces DIR --only itp --quick --seeds 0-4

What a trace lacks is drawn from the seed (gqa simulate's assumption lines):
each job's wall time (under `model`, `default` and `fitted`; under `max`
every job asks the same) and its team and user. On a small cluster a few
long jobs decide a row (Alibaba's rows run on 8 to 16 GPUs, with pods that
run for days), so a goal met or missed in one seed's row may be the draw's.
This replays the same rows under each seed and prints, per goal, how many
rows meet it in each seed, and per row and goal, in how many seeds it is met
and the spread of the ratio it is judged by. `--weights` replays gqa again
with other weights on the same rows and counts, for each, the goals met over
all the seeds: a choice of weights judged on one seed's table may be that
draw's."""

import argparse
import copy
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gqa.scheduling.horizon import BACKFILL_BY, LIMITS  # noqa: E402
from gqa.scheduling.presets import preset  # noqa: E402
from gqa.scheduling.snapshot import Policy, Weights  # noqa: E402
from gqa.sim import cluster, summarize  # noqa: E402
from gqa.sim.engine import simulate  # noqa: E402
from gqa.sim.estimates import MODES, Estimates, EstimatesError  # noqa: E402
from gqa.sim.policies import NAMES  # noqa: E402
from gqa.sim.workload import PRIORITIES, priorities_choice  # noqa: E402
from simulate_traces import (GOALS, QUICK_JOBS, TARGETS, TRACES, _workload, check_shared, goal_met,  # noqa: E402
                             goals, goals_met, plan_rows, run_replays, targets_of)

# the goals shown row by row: gqa's and gqa-slice's JCT, the worst team's slowdown, utilisation
ROW_GOALS = ("jct_vs_las", "jct_vs_oracle", "slice_jct_vs_las", "slice_jct_vs_las_tiers", "worst_team_vs_fifo_easy",
             "util_points_vs_fifo_easy", "util_in_arrivals_points_vs_fifo_easy")
SHORT = {"jct_vs_las": "gqa/las", "jct_vs_oracle": "gqa/oracle", "slice_jct_vs_las": "slice/las",
         "slice_jct_vs_las_tiers": "slice/las-tiers", "jct_vs_las_tiers": "gqa/las-tiers",
         "worst_team_vs_fifo_easy": "worst team",
         "util_points_vs_fifo_easy": "util", "util_in_arrivals_points_vs_fifo_easy": "util (arrivals)"}


def seeds_of(text: str) -> list[int]:
    """'0-9', '3' or '0,2,5' as a list of seeds; ValueError naming the text else."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            first, dash, last = part.strip().partition("-")
            low, high = int(first), int(last if dash else first)
            if high < low:
                raise ValueError
            seeds += range(low, high + 1)
    except ValueError:
        raise ValueError(f"seeds must be numbers or ranges such as 0-9 or 0,2,5, not {text!r}") from None
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"seeds must be distinct, not {text!r}")
    return seeds


def weights_of(text: str) -> list[Weights]:
    """'5:1:1,8:1:1' (duration:age:fair share, each set) as Weights; ValueError naming the text else."""
    out = []
    for part in text.split(","):
        try:
            duration, age, fair_share = (float(v) for v in part.split(":"))
        except ValueError:
            raise ValueError(f"weights must be duration:age:fair-share sets such as 5:1:1,8:1:1, "
                             f"not {part!r}") from None
        if not all(0 <= v < float("inf") for v in (duration, age, fair_share)):
            raise ValueError(f"weights must be finite numbers of 0 or more, not {part!r}")
        out.append(Weights(fair_share=fair_share, age=age, duration=duration))
    return out


def replay_weighted(task: tuple) -> dict:
    """gqa with other weights on one row's workload (in a worker process, as simulate_traces.replay)."""
    traces, name, quick, seed, mode, priorities, gpus, weights, backfill_by = task
    work = _workload(str(Path(traces) / TRACES[name]), QUICK_JOBS[name] if quick else None, seed, mode, priorities)
    policy = replace(preset("gqa", Policy(backfill_by=backfill_by)), weights=weights)
    return summarize(simulate(work, cluster(gpus), policy, name="gqa"))


def weights_met(rows: list[dict], choices: list[Weights], traces: str, quick: bool, workers: int) -> list[dict]:
    """The goals met over all the rows, with the traces' tiers and in one: first with the default
    weights, as the rows were replayed, then for each choice, gqa replayed with it on every row (the
    other policies' replays kept)."""
    tasks = [(traces, r["trace"], quick, r["seed"], r["estimates"], r["priorities"], r["gpus"], w, r["backfill_by"])
             for w in choices for r in rows]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        summaries = list(pool.map(replay_weighted, tasks, chunksize=4))
    out = [_weights_row(preset("gqa").weights, rows)]   # the default's, as the rows replayed it
    for i, weights in enumerate(choices):
        mine = copy.deepcopy(rows)
        for row, summary in zip(mine, summaries[i * len(rows):(i + 1) * len(rows)]):
            row["policies"]["gqa"] = summary
            row["goals"] = goals(row)
        out.append(_weights_row(weights, mine))
    return out


def _weights_row(weights: Weights, rows: list[dict]) -> dict:
    return {"weights": {"duration": weights.duration, "age": weights.age, "fair_share": weights.fair_share},
            "met": {p: goals_met([r for r in rows if r["priorities"] == p]) for p in PRIORITIES}}


def row_key(row: dict) -> tuple:
    return row["trace"], row["estimates"], row["tiers"], row["target"]


def spread(rows_by_seed: dict[int, list[dict]]) -> dict:
    """Per seed, each goal's (met, judged) over the rows with the traces' tiers and over those in one;
    per row, each shown goal's seeds met and its ratio's least, median and most."""
    per_seed = {seed: {p: goals_met([r for r in rows if r["priorities"] == p]) for p in PRIORITIES}
                for seed, rows in rows_by_seed.items()}
    by_row: dict[tuple, list[dict]] = {}
    for rows in rows_by_seed.values():
        for row in rows:
            by_row.setdefault(row_key(row), []).append(row)
    per_row = []
    for key, rows in by_row.items():
        cells = {}
        for name in ROW_GOALS:
            judged = [(met, r["goals"][name]) for r in rows if (met := goal_met(r, name)) is not None]
            if judged:
                values = [v for _, v in judged]
                cells[name] = {"met": sum(m for m, _ in judged), "of": len(judged), "least": min(values),
                               "median": statistics.median(values), "most": max(values)}
        per_row.append({"trace": key[0], "estimates": key[1], "tiers": key[2], "target": key[3],
                        "gpus": sorted({r["gpus"] for r in rows}), "goals": cells})
    return {"per_seed": per_seed, "per_row": per_row}


def print_spread(out: dict, seeds: list[int], wall: float) -> None:
    print(f"goals met per seed, in rows where each is judged ({len(seeds)} seeds, {wall / 60:.1f} min)")
    print(f"{'goal':<40}" + "".join(f"{'seed ' + str(s):>9}" for s in seeds))
    for priorities in PRIORITIES:
        names = [n for n in GOALS if any(n in out["per_seed"][s][priorities] for s in seeds)]
        if names:
            print("the traces' own tiers:" if priorities == "trace" else "every job in one tier:")
        for name in names:
            print(f"  {name:<38}" + "".join(f"{_count(out['per_seed'][s][priorities].get(name)):>9}" for s in seeds))
    print("\nper row: seeds meeting each goal, and its ratio (least / median / most over the seeds)")
    for row in out["per_row"]:
        cells = []
        for name, c in row["goals"].items():
            fmt = "{:+.1f}" if name.startswith("util") else "{:.2f}x"
            values = " / ".join(fmt.format(c[k]) for k in ("least", "median", "most"))
            cells.append(f"{SHORT[name]} {c['met']}/{c['of']} ({values})")
        print(f"{row['trace']} {row['estimates']} tiers {row['tiers']} {row['target']:.0%}: " + "; ".join(cells))


WEIGHT_GOALS = ("jct_vs_las", "jct_vs_oracle", "worst_team_vs_fifo_easy", "util_points_vs_fifo_easy",
                "util_in_arrivals_points_vs_fifo_easy", "jct_vs_las_tiers")


def _count(met: tuple[int, int] | list[int] | None) -> str:
    """(met, judged) as 'met/judged'; '-' where the goal is not judged."""
    return f"{met[0]}/{met[1]}" if met else "-"


def print_weights(choices: list[dict]) -> None:
    print("\ngqa's weights (duration, age, fair share): goals met over every seed's rows")
    print(f"{'weights':<16}{'tiers':<7}" + "".join(f"{SHORT[g]:>17}" for g in WEIGHT_GOALS))
    for choice in choices:
        w = choice["weights"]
        label = f"{w['duration']:g}, {w['age']:g}, {w['fair_share']:g}"
        for priorities, met in choice["met"].items():
            if met:
                print(f"{label:<16}{priorities:<7}" + "".join(f"{_count(met.get(g)):>17}" for g in WEIGHT_GOALS))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=os.environ.get("GQA_TRACES", str(ROOT / "traces")),
                        help="the folder holding the trace files (default: $GQA_TRACES, else traces/)")
    parser.add_argument("--only", default="alibaba", help="itp, alibaba or both (default: alibaba)")
    parser.add_argument("--seeds", default="0-9", help="seeds to replay: a range (0-9) or a list (0,2,5)")
    parser.add_argument("--quick", action="store_true", help="a prefix of each trace")
    parser.add_argument("--targets", default=",".join(f"{t:g}" for t in TARGETS), help="utilisation targets")
    parser.add_argument("--estimates", default=",".join(MODES), help=f"any of {', '.join(MODES)}")
    parser.add_argument("--priorities", default=",".join(PRIORITIES), help="trace, one or both")
    parser.add_argument("--eta-jobs", type=int, default=0,
                        help="gqa's ETA is checked for about this many arrivals per replay (default 0: none)")
    parser.add_argument("--weights", help="also replay gqa with these weights, duration:age:fair-share each "
                                           "(5:1:1 is the default), counting the goals each meets beside the "
                                           "default's")
    parser.add_argument("--backfill-by", default=LIMITS, choices=BACKFILL_BY,
                        help="what gqa and gqa-slice count a job's run as when they backfill (as simulate_traces.py)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("-o", "--output", default="table", choices=("table", "json"))
    args = parser.parse_args()
    check_shared(parser, args)
    try:
        choices = weights_of(args.weights) if args.weights else []
        seeds = seeds_of(args.seeds)
        targets = targets_of(args.targets)
        modes = [Estimates(m).mode for m in args.estimates.split(",")]
        tiers_asked = [priorities_choice(p) for p in args.priorities.split(",")]
    except (ValueError, EstimatesError) as exc:
        parser.error(str(exc))
    began = time.perf_counter()
    rows_by_seed, tasks = {}, []
    for seed in seeds:
        rows, mine = plan_rows(args.traces, args.only.split(","), args.quick, seed, modes, tiers_asked, targets,
                               list(NAMES), args.eta_jobs, args.backfill_by)
        rows_by_seed[seed] = rows
        tasks += mine
    if not tasks:
        print("no trace to replay: see the messages above", file=sys.stderr)
        return 2
    run_replays(tasks, args.workers)
    out = spread(rows_by_seed)
    every_row = [row for rows in rows_by_seed.values() for row in rows]
    out["weights"] = weights_met(every_row, choices, args.traces, args.quick, args.workers) if choices else []
    wall = time.perf_counter() - began
    if args.output == "json":
        print(json.dumps({**out, "per_seed": {str(s): v for s, v in out["per_seed"].items()}, "seeds": seeds,
                          "wall_s": wall}, indent=2, default=list))
    else:
        print_spread(out, seeds, wall)
        if out["weights"]:
            print_weights(out["weights"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
