"""What a large array costs the local queue's database, against a revision.

    python benchmarks/array_storage.py                               # 100,000 tasks, 1.5 and 10 KB environments
    python benchmarks/array_storage.py --tasks 20000 --env-kb 10 --against HEAD~1 --rounds 3

One array of --tasks tasks written to a fresh SQLite queue as the submit
service writes it (one spec, one submitter environment of --env-kb KB, in
one transaction), then what users and the daemon do with it: the file's
size per task, `gqa status` of the array (its records read at once), the
launch's read of one task and one guarded change of a task (the median of
200 each), and a cancel of every task at once. Each environment size runs
in a process of its own; with --against REV the same runs from that
revision of this repository, interleaved, --rounds times (medians)."""

import argparse
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from side_by_side import add_options, rows_by_size, run_snippet  # noqa: E402

ONE = r"""
import dataclasses, json, os, statistics, sys, tempfile, time
from pathlib import Path
from gqa.adapters.local.store import SqliteStore
from gqa.models.job import JobState as S
from gqa.ports import Change
from tests.builders import job_record
tasks, env_bytes = int(sys.argv[1]), int(sys.argv[2])
env = {f"VAR_{i}": "x" * 90 for i in range(env_bytes // 100)}
first = job_record(id="", group="", array_index=0, submit_env=env)
records = [first] + [dataclasses.replace(first, array_index=i) for i in range(1, tasks)]
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "gqa.db"
    store = SqliteStore(path)
    began = time.perf_counter()
    made = store.create(records)
    create_s = time.perf_counter() - began
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = sum(p.stat().st_size for p in Path(tmp).iterdir() if p.name.startswith("gqa.db"))
    began = time.perf_counter()
    whole = store.resolve(made[0].group, history=False)
    status_s = time.perf_counter() - began
    assert len(whole) == tasks and whole[-1].submit_env == env
    gets, changes = [], []
    for k in range(200):
        job = made[k * (tasks // 200)]
        began = time.perf_counter()
        store.get(job.id)
        gets.append(time.perf_counter() - began)
        began = time.perf_counter()
        store.apply([Change(job.id, S.QUEUED, S.HELD, "held", 1.0)])
        changes.append(time.perf_counter() - began)
    held = {made[k * (tasks // 200)].id for k in range(200)}
    began = time.perf_counter()
    store.apply_each([Change(j.id, S.HELD if j.id in held else S.QUEUED, S.CANCELLED, "cancelled", 2.0,
                             {"ended_at": 2.0}) for j in made])
    cancel_s = time.perf_counter() - began
    store.close()
print(json.dumps({"tasks": tasks, "create_s": create_s, "bytes_per_task": size / tasks, "status_s": status_s,
                  "get_ms": statistics.median(gets) * 1000, "change_ms": statistics.median(changes) * 1000,
                  "cancel_s": cancel_s}))
"""
FIGURES = ("create_s", "bytes_per_task", "status_s", "get_ms", "change_ms", "cancel_s")


def measure(sources: Path, size: float, tasks: int) -> dict:
    """One run: `size` is the environment's KB."""
    return run_snippet(ONE, sources, tasks, int(size * 1024))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="the array's tasks (default 100,000)")
    parser.add_argument("--env-kb", default="1.5,10", help="environment sizes in KB, comma-separated")
    add_options(parser)
    args = parser.parse_args()
    try:
        sizes = [float(s) for s in args.env_kb.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--env-kb takes numbers, not {args.env_kb!r}")
    if args.tasks < 200 or not sizes or min(sizes) < 0 or args.rounds < 1:
        parser.error("--tasks must be at least 200, --env-kb sizes at least 0, --rounds at least 1")
    return rows_by_size(parser, args, sizes, partial(measure, tasks=args.tasks), FIGURES, line,
                        "gqa-array-storage-", size_key="env_kb")


def line(row: dict, against: str | None) -> str:
    mb = row["bytes_per_task"] * row["tasks"] / 1e6
    text = (f"{row['tasks']:,} tasks, a {row['env_kb']:g} KB environment: {mb:,.0f} MB "
            f"({row['bytes_per_task']:,.0f} bytes a task), written in {row['create_s']:.2f} s, "
            f"status {row['status_s']:.2f} s, a task's read {row['get_ms']:.2f} ms and change "
            f"{row['change_ms']:.2f} ms, all cancelled in {row['cancel_s']:.2f} s")
    if against:
        def x(k: str) -> str:
            return f"{row[k] / row['against_' + k]:.2f}x" if row["against_" + k] else "-"
        was = row["against_bytes_per_task"] * row["tasks"] / 1e6
        text += (f"\n  at {against}: {was:,.0f} MB ({x('bytes_per_task')}), written in "
                 f"{row['against_create_s']:.2f} s ({x('create_s')}), status {row['against_status_s']:.2f} s "
                 f"({x('status_s')}), read {row['against_get_ms']:.2f} ms ({x('get_ms')}), change "
                 f"{row['against_change_ms']:.2f} ms ({x('change_ms')}), cancelled in "
                 f"{row['against_cancel_s']:.2f} s ({x('cancel_s')})")
    return text


if __name__ == "__main__":
    sys.exit(main())
