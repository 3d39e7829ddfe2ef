"""What one pass of the local daemon costs with a long queue, against a revision.

    python benchmarks/local_pass.py                          # 3,000 and 10,000 queued
    python benchmarks/local_pass.py --sizes 3000 --against HEAD~1 --rounds 3

A queue of N jobs on SQLite (two teams, wall times of 1-8 hours, one GPU
each, in arrays of 100) on 8 GPUs, with the daemon's supervisor over fake compute: each of
--passes turns the clock on, one running job succeeds (a run-time sample for
its team) and the supervisor dispatches, as the daemon does after every exit.
The figures are the median and mean time of a dispatch (the store's read, the
estimates, the kept index and the plan), with how many passes built their
index afresh: a pass that builds it costs many that keep it, so the mean
shows what the median hides.
Each size runs in a process of its own; with --against REV the same runs
from that revision of this repository (its sources read with git archive),
interleaved, --rounds times, and the row says whether both started the same
jobs on the same GPUs in the same passes."""

import argparse
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from side_by_side import add_options, rows_by_size, run_snippet, sizes_of  # noqa: E402

# one run, in a fresh process from the sources on its sys.path: prints one JSON line
ONE = r"""
import hashlib, json, random, statistics, sys, tempfile, time
from pathlib import Path
from gqa.adapters.local.store import SqliteStore
from tests.services.conftest import Queue
size, passes = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(0)
with tempfile.TemporaryDirectory() as tmp:
    queue = Queue(SqliteStore(Path(tmp) / "gqa.db"), 8)
    from tests.builders import spec
    for first in range(0, size, 100):   # arrays of 100 tasks, each its team and wall time
        queue.submitter.submit(spec(team=rng.choice(("vision", "nlp")), array=f"0-{min(size - first, 100) - 1}",
                                    limits={"wall_time": f"{rng.randint(1, 8)}h"}))
    running = [j.id for j in queue.supervisor.dispatch()]
    started, took = [list(running)], []
    for n in range(passes):
        queue.clock.advance(rng.uniform(60, 600))
        queue.exit(running.pop(rng.randrange(len(running))), 0)
        began = time.perf_counter()
        jobs = queue.supervisor.dispatch()
        took.append(time.perf_counter() - began)
        running += [j.id for j in jobs]
        started.append([(j.id, j.assigned) for j in jobs])
    queue.store.close()
print(json.dumps({"pass_ms": statistics.median(took) * 1000, "mean_ms": statistics.fmean(took) * 1000,
                  "builds": getattr(queue.supervisor, "kept", None) and queue.supervisor.kept.built,
                  "passes": passes + 1,
                  "starts": hashlib.sha256(repr(started).encode()).hexdigest()[:16]}))
"""


def run(sources: Path, size: int, passes: int) -> dict:
    return run_snippet(ONE, sources, size, passes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="3000,10000", help="queued jobs, comma-separated")
    parser.add_argument("--passes", type=int, default=200, help="passes after the first (default 200)")
    add_options(parser)
    args = parser.parse_args()
    sizes = sizes_of(parser, args.sizes)
    if not sizes or min(sizes) < 8 or args.passes < 1 or args.rounds < 1:
        parser.error("--sizes must be at least 8 (the GPUs), --passes and --rounds at least 1")
    return rows_by_size(parser, args, sizes, partial(run, passes=args.passes), ("pass_ms", "mean_ms"), line,
                        "gqa-local-pass-", theirs_last=("builds",))


def line(row: dict, against: str | None) -> str:
    text = (f"{row['queued']:,} queued: a pass {row['pass_ms']:.1f} ms (mean {row['mean_ms']:.1f}), "
            f"{row['builds']} of {row['passes']} passes built the index")
    if against:
        text += (f"; at {against} {row['against_pass_ms']:.1f} ms ({row['pass_ms'] / row['against_pass_ms']:.2f}x; "
                 f"mean {row['against_mean_ms']:.1f}, {row['mean_ms'] / row['against_mean_ms']:.2f}x), "
                 f"{row['against_builds']} built; {'the same' if row['same_starts'] else 'other'} starts")
    return text


if __name__ == "__main__":
    sys.exit(main())
