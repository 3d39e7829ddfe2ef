"""How long `gqa queue` and `gqa history` take as real CLI processes, with
100, 10,000 and 100,000 jobs in a local queue, against `gqa --help` (the
floor: a CLI start that reads nothing), as ratios measured in one run.

Each size gets a queue of its own in a temporary GQA_HOME, written straight
through the store in big batches: N queued jobs for `gqa queue` (plus 4
running), N finished jobs for `gqa history` (ended over the last 23 hours,
so the default window holds them all; it prints the newest 100). `gqa
queue` is timed twice: `queue` computes the view itself (no daemon has
kept one), `queue-kept` reads the view the daemon keeps after its passes
(written here by the daemon's own QueueKeeper). Each
view runs `--runs` times in turns with `gqa --help`, so a machine whose
load changes weighs on both; the medians count. The goal: under 2x the
floor at 10,000 jobs.

    python -m benchmarks.cli_views                 # 100, 10,000, 100,000 jobs; 5 runs each
    python -m benchmarks.cli_views --sizes 100 10000 --runs 3
    python -m benchmarks.cli_views --views history
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.store import SqliteStore
from gqa.models.job import JobRecord, JobState, Transition
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu

S = JobState
GOAL = 2.0          # each view under this many times the floor at 10,000 jobs
BATCH = 10_000      # jobs per create(): one transaction each
SPEC = '{"name":"train","team":"default","owner":"alice","command":["python","train.py"]}'


def gqa() -> list[str]:
    """The installed `gqa` next to this interpreter (what a user runs), else the module."""
    script = Path(sys.executable).with_name("gqa")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli.client"]


def job(state: JobState, at: float, k: int) -> JobRecord:
    history = [Transition(S.SUBMITTED, at - 600, "submitted"), Transition(S.QUEUED, at - 600, "admitted")]
    fields: dict = {}
    if state != S.QUEUED:
        history += [Transition(S.STARTING, at - 500, "claimed"), Transition(S.RUNNING, at - 500, "started")]
        fields = {"started_at": at - 500, "assigned": (k % 4,), "attempts": 1}
    if state.terminal:
        history.append(Transition(state, at, "exited with code 0"))
        fields.update(ended_at=at, exit_code=0, gpu_seconds=500.0, cost=0.06)
    return JobRecord(id="", group="", name=f"train-{k % 50}", team=("vision", "nlp")[k % 2],
                     owner=("alice", "bob", "carol")[k % 3], tier=1, gpus=1, gpu_type="a10g", cpus=None,
                     memory=None, wall_time=3600, submitted_at=at - 600, spec_json=SPEC, state=state,
                     history=tuple(history), reason=history[-1].reason, **fields)


def fill(home: Path, n: int, state: JobState) -> None:
    paths = StatePaths(home)
    home.mkdir(mode=0o700)
    paths.ensure()
    store = SqliteStore(paths.db, durable=False)
    store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", 1.0) for i in range(4))))
    now = time.time()
    for start in range(0, n, BATCH):
        count = min(BATCH, n - start)
        # finished jobs end over the last 23 hours, newest last
        store.create([job(state, now - 23 * 3600 * (1 - (start + k) / n), start + k) for k in range(count)])
    if state == S.QUEUED:
        store.create([job(S.RUNNING, now, k) for k in range(4)])
    store.close()


def keep(home: Path) -> None:
    """The queue's view written as the daemon keeps it after a pass (daemon/queue_keeper.py)."""
    from cli.local_backend import LocalBackend
    from daemon.queue_keeper import QueueKeeper

    if not QueueKeeper(LocalBackend(home), write_file=True).keep_now():
        raise SystemExit(f"the queue's view of {home} was not kept")


def once(args: list[str], home: Path) -> float:
    env = {**os.environ, "GQA_HOME": str(home), "COLUMNS": "80"}
    env.pop("GQA_PROFILE", None)
    start = time.perf_counter()
    done = subprocess.run(gqa() + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"gqa {' '.join(args)} failed: {done.stderr.decode().strip()}")
    return took


def timed(args: list[str], home: Path, runs: int) -> tuple[float, float]:
    """Medians of the view and of `gqa --help`, run in turns: a machine whose load
    changes meanwhile weighs on both alike."""
    once(args, home)   # the file cache warm
    view, floor = [], []
    for _ in range(runs):
        floor.append(once(["--help"], home))
        view.append(once(args, home))
    return statistics.median(view), statistics.median(floor)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--views", nargs="+", choices=("queue", "queue-kept", "history"),
                        default=["queue", "queue-kept", "history"])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gqa-views-") as tmp:
        root = Path(tmp)
        print(f"median of {args.runs} runs each, `gqa --help` run in turns with each view")
        verdicts: dict[str, float] = {}
        for n in args.sizes:
            for view, state in ((v, s) for v, s in (("queue", S.QUEUED), ("queue-kept", S.QUEUED),
                                                    ("history", S.SUCCEEDED)) if v in args.views):
                home = root / f"{view}-{n}"
                fill(home, n, state)
                if view == "queue-kept":
                    keep(home)
                took, floor = timed([view.removesuffix("-kept")], home, args.runs)
                ratio = took / floor
                print(f"gqa {view:<10} {n:>7,} jobs: {took:.3f} s, {ratio:.2f}x gqa --help ({floor:.3f} s)")
                if n == 10_000:
                    verdicts[view] = ratio
        for view, ratio in verdicts.items():
            print(f"goal: gqa {view} under {GOAL:g}x the floor at 10,000 jobs: {ratio:.2f}x, "
                  f"{'met' if ratio < GOAL else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
