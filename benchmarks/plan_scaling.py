"""How one scheduling pass grows with the queue: `plan()` over 1k, 10k and
100k pending jobs, 1k running, on 2,000 GPUs, and the growth ratios against
the n log n the ranking promises.

    python benchmarks/plan_scaling.py            # 1k, 10k, 100k pending
    python benchmarks/plan_scaling.py --quick    # 1k, 10k
    python benchmarks/plan_scaling.py -o json
    python benchmarks/plan_scaling.py --quick --begin 0.5   # half of them waiting for their --begin
    python benchmarks/plan_scaling.py --quick --dependency 0.5   # half waiting on a job still running

Jobs are random but seeded: 8 teams with unequal past usage, sizes 1-8 GPUs,
wall times 30 minutes to 3 days, all three tiers; with --begin SHARE, that
share of them waits for a --begin time within the next two days; with
--dependency SHARE, on a job of its own still running (afterok). The running jobs leave 32
GPUs free, so a pass starts a few jobs and then has to place (and, with
backfill, reserve for) the rest. Each size is timed a few times; the best run
counts (the least disturbed by the rest of the machine). "kept index" is the
pass a caller pays that keeps its queue in a QueueIndex between passes (the
replay, the ETA): the index is built once, outside the timing. "kept queue"
is a dispatcher's pass (the local daemon, the dispatch function): its queue
read afresh at every pass, one job arrived and one gone since the pass
before, its index brought along by those (gqa.scheduling.kept); "starts
only" is what that pass cost before it kept its index."""

import argparse
import inspect
import json
import math
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gqa.scheduling import Gpu, PendingJob, RunningJob, Snapshot, TeamPolicy, plan  # noqa: E402
from gqa.models.job import JobState  # noqa: E402
from gqa.scheduling.presets import preset  # noqa: E402

NOW = 10_000_000.0
TEAMS = [f"team{i}" for i in range(8)]
SIZES = (1, 1, 1, 1, 2, 2, 4, 8)
WALLS = (1800, 3600, 7200, 14400, 28800, 86400, 259200)
FREE_GPUS = 32
DEPENDED_ON = 1_000_000   # the first id a --dependency names


def snapshot(pending: int, running: int, gpus: int, policy_name: str, seed: int = 0,
             begin_share: float = 0.0, dependency_share: float = 0.0) -> Snapshot:
    rng = random.Random(seed)
    # the running jobs hold all but FREE_GPUS: a pass starts a few jobs, then ranks,
    # places and reserves for the rest, which is the part that grows with the queue
    sizes = [1] * running
    for _ in range(max(0, gpus - FREE_GPUS - running)):
        sizes[rng.randrange(running)] += 1
    run_jobs, index = [], 0
    for i, size in enumerate(sizes):
        team = rng.choice(TEAMS)
        run_jobs.append(RunningJob(id=f"r{i}", team=team, user=f"{team}-u{rng.randrange(5)}",
                                   gpus=tuple(range(index, index + size)), started_at=NOW - rng.uniform(0, 86400),
                                   wall_time=rng.choice(WALLS) + 86400))
        index += size
    pend = []
    for i in range(pending):
        team, wall = rng.choice(TEAMS), rng.choice(WALLS)
        pend.append(PendingJob(id=f"p{i}", team=team, user=f"{team}-u{rng.randrange(5)}",
                               tier=rng.choice((0, 1, 1, 1, 1, 2)), gpus=rng.choice(SIZES),
                               submitted_at=NOW - rng.uniform(0, 7 * 86400), wall_time=wall,
                               expected_runtime=wall, seq=i))
    if begin_share:   # drawn after the rest, so that the queue is the same job for job but for them
        pend = [replace(job, begin=NOW + rng.uniform(60, 2 * 86400)) if rng.random() < begin_share else job
                for job in pend]
    named = {}
    if dependency_share:   # each on a job of its own (an id the store would give), which is running
        pend = [replace(job, dependency=f"afterok:{DEPENDED_ON + i}") if rng.random() < dependency_share else job
                for i, job in enumerate(pend)]
        named = {job.dependency.partition(":")[2]: {JobState.RUNNING: 1} for job in pend if job.dependency}
    return Snapshot(now=NOW, gpus=tuple(Gpu(i, "gpu") for i in range(gpus)), pending=tuple(pend),
                    running=tuple(run_jobs), teams={t: TeamPolicy() for t in TEAMS},
                    usage={t: 3600.0 * (k + 1) ** 2 for k, t in enumerate(TEAMS)}, policy=preset(policy_name),
                    named=named)


def kept_index():
    """How this version of the core lets a caller keep its queue between passes, if it does."""
    try:
        from gqa.scheduling.index import QueueIndex
    except ImportError:
        return None

    def kept(snap: Snapshot) -> Snapshot:
        """The snapshot as views of an index built once, as the replay and the ETA keep one."""
        index = QueueIndex.of(snap.gpus, snap.policy, snap.pending, snap.running, snap.now)
        return replace(snap, pending=index.pending_view, running=index.running_view)
    return kept


kept = kept_index()


def kept_queue():
    """How this version of the core lets a dispatcher keep its index between passes, if it does."""
    try:
        from gqa.scheduling.kept import KeptQueue
    except ImportError:
        return None
    return KeptQueue


KeptQueue = kept_queue()


def kept_queue_time(snap: Snapshot, repeat: int) -> float:
    """A dispatcher's pass that keeps its index (gqa.scheduling.kept), best of `repeat`: at each
    pass one job has arrived and one has left since the pass before, and the queue is read afresh
    as tuples, as a dispatcher reads it; the index is brought along by those changes."""
    assert KeptQueue is not None
    keeper = KeptQueue()
    plan(keeper.over(snap), explain=False)   # the first pass builds it
    steps = [replace(snap, now=snap.now + k + 1,
                     pending=snap.pending[k + 1:] + (replace(snap.pending[k], id=f"new{k}", seq=10 ** 9 + k),))
             for k in range(repeat)]
    best = math.inf
    for step in steps:
        began = time.perf_counter()
        plan(keeper.over(step), explain=False)
        best = min(best, time.perf_counter() - began)
    return best


def best_time(snap: Snapshot, repeat: int, **options) -> float:
    best = math.inf
    for _ in range(repeat):
        began = time.perf_counter()
        plan(snap, **options)
        best = min(best, time.perf_counter() - began)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k pending only")
    parser.add_argument("--gpus", type=int, default=2000)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--policies", default="fifo,gqa")
    parser.add_argument("--begin", type=float, default=0.0, metavar="SHARE",
                        help="the share of the pending jobs waiting for a --begin time (default 0)")
    parser.add_argument("--dependency", type=float, default=0.0, metavar="SHARE",
                        help="the share of the pending jobs waiting on a running job (default 0)")
    parser.add_argument("-o", "--output", default="table", choices=("table", "json"))
    args = parser.parse_args()
    if not 0 <= args.begin <= 1 or not 0 <= args.dependency <= 1:
        parser.error("--begin and --dependency are shares of the pending jobs, from 0 to 1")
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    modes = [("explain", {})]
    if "explain" in inspect.signature(plan).parameters:
        modes.append(("starts only", {"explain": False}))
    if kept is not None:
        modes.append(("kept index", {"explain": False, "kept": True}))
    if KeptQueue is not None:
        modes.append(("kept queue", {"explain": False, "queue": True}))
    rows = []
    for policy in args.policies.split(","):
        for mode, options in modes:
            times = {}
            keep = options.get("kept", False)
            for n in sizes:
                snap = snapshot(n, args.running, args.gpus, policy, begin_share=args.begin,
                                dependency_share=args.dependency)
                repeat = 5 if n <= 10_000 else 2
                if options.get("queue"):
                    times[n] = kept_queue_time(snap, repeat)
                    continue
                if keep:
                    snap = kept(snap)
                times[n] = best_time(snap, repeat=repeat, **{k: v for k, v in options.items() if k != "kept"})
            rows.append({"policy": policy, "mode": mode, "seconds": times})
    if args.output == "json":
        print(json.dumps({"gpus": args.gpus, "running": args.running, "rows": rows}, indent=2))
        return 0
    print(f"one plan() pass, {args.running} running jobs on {args.gpus} GPUs (best of several runs)")
    header = f"{'policy':<8} {'mode':<12}" + "".join(f"{f'{n:,} pending':>16}" for n in sizes)
    print(header)
    for row in rows:
        print(f"{row['policy']:<8} {row['mode']:<12}" + "".join(f"{row['seconds'][n] * 1000:>13.1f} ms"
                                                               for n in sizes))
    print()
    print("growth per 10x more pending (n log n predicts "
          + ", ".join(f"{_nlogn(a, b):.1f}x for {a // 1000}k->{b // 1000}k" for a, b in zip(sizes, sizes[1:])) + ")")
    for row in rows:
        t = row["seconds"]
        print(f"  {row['policy']:<8} {row['mode']:<12} "
              + ", ".join(f"{b // 1000}k/{a // 1000}k = {t[b] / t[a]:.1f}x" for a, b in zip(sizes, sizes[1:])))
    return 0


def _nlogn(a: int, b: int) -> float:
    return (b * math.log(b)) / (a * math.log(a))


if __name__ == "__main__":
    sys.exit(main())
