"""What a warm pass of the dispatch function costs with a long queue, against a revision.

    python benchmarks/aws_warm_pass.py                         # 5,000 and 20,000 queued
    python benchmarks/aws_warm_pass.py --sizes 20000 --against HEAD~1 --rounds 3

The queue is written straight into the jobs table on moto (aws_pass_cost.fill:
100 GPUs busy with running jobs, the rest queued), the container's first pass
reads it whole, then each of --passes ends one running job, as the
settlement does, and runs the dispatch function's real handler woken by the
settlement's wake-up (which carries the ended job: moto is asked for few
items, so the pass's own work shows). The figure is the median time of a
warm pass, moto's share included, and the process's CPU time over them.
Each size runs in a process of its own; with --against REV the same runs
from that revision of this repository (its sources read with git archive),
interleaved, --rounds times, and the row says whether both started the same
jobs in the same passes."""

import argparse
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from side_by_side import add_options, rows_by_size, run_snippet, sizes_of  # noqa: E402

# one run, in a fresh process from the sources on its sys.path: prints one JSON line
ONE = r"""
import hashlib, json, logging, statistics, sys, time
import boto3
from benchmarks import aws_pass_cost as cost
from gqa.adapters.aws import wakeups
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import Pool
from gqa.models.job import JobState as S
from gqa.ports import Change
from tests.aws.fake_batch import CONTEXT, NAMES, REGION, WAKEUP_EVENT, deployment
logging.disable(logging.INFO)
size, passes = int(sys.argv[1]), int(sys.argv[2])
session = boto3.session.Session(region_name=REGION)
pools = (Pool("a10g", spot=True, max_gpus=cost.GPUS, price=0.4),)
with deployment(now=time.time(), session=session, pools=pools) as world:
    world.dispatch.container()
    client = world.client("dynamodb")
    cost.fill(client, size, cost.GPUS, world.clock.now())
    writer = DynamoDBStore(client, NAMES)
    world.clock.advance(120)
    world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
    took, started, cpu = [], [], time.process_time()
    for n in range(passes):
        world.clock.advance(120)
        ended = str(n + 1)
        writer.apply([Change(ended, S.RUNNING, S.SUCCEEDED, "exit code 0", world.clock.now(),
                             {"ended_at": world.clock.now(), "assigned": ()})])
        body = wakeups.body([ended], writer.wakeup_items([ended]))
        began = time.perf_counter()
        out = world.dispatch.handler({"Records": [{**WAKEUP_EVENT["Records"][0], "body": body}]}, CONTEXT)
        took.append(time.perf_counter() - began)
        started.append(out["started"])
    cpu = time.process_time() - cpu
print(json.dumps({"pass_ms": statistics.median(took) * 1000, "cpu_s": cpu, "passes": passes,
                  "started": sum(len(s) for s in started),
                  "starts": hashlib.sha256(repr(started).encode()).hexdigest()[:16]}))
"""


def run(sources: Path, size: int, passes: int) -> dict:
    return run_snippet(ONE, sources, size, passes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="5000,20000", help="queued jobs, comma-separated")
    parser.add_argument("--passes", type=int, default=30, help="warm passes (default 30)")
    add_options(parser)
    args = parser.parse_args()
    sizes = sizes_of(parser, args.sizes)
    if not sizes or min(sizes) < 1 or not 1 <= args.passes <= 100 or args.rounds < 1:
        parser.error("--sizes must be at least 1, --passes from 1 to 100 (the running jobs), --rounds at least 1")
    return rows_by_size(parser, args, sizes, partial(run, passes=args.passes), ("pass_ms", "cpu_s"), line,
                        "gqa-aws-pass-")


def line(row: dict, against: str | None) -> str:
    text = (f"{row['queued']:,} queued: a warm pass {row['pass_ms']:.0f} ms on moto, "
            f"{row['cpu_s']:.1f} s of CPU over {row['passes']} passes, {row['started']} started")
    if against:
        text += (f"; at {against} {row['against_pass_ms']:.0f} ms ({row['pass_ms'] / row['against_pass_ms']:.2f}x), "
                 f"{row['against_cpu_s']:.1f} s of CPU ({row['cpu_s'] / row['against_cpu_s']:.2f}x); "
                 f"{'the same' if row['same_starts'] else 'other'} starts")
    return text


if __name__ == "__main__":
    sys.exit(main())
