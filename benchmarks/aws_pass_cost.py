"""What one dispatch pass reads at 10,000 and 100,000 queued jobs, on moto.

The queue is written straight into the jobs table (BatchWriteItem, the
items the store's own codec makes: queued jobs, and a pool's GPUs all busy
with running ones), then the dispatch function's real handler runs:

- a cold pass: the container's first, reading the pass index whole (its
  projection, a Query a shard): it grows with the queue;
- a warm pass woken by a settlement: the wake-up carries the ended job as
  written, the pass starts the queue's head in its GPU (one BatchGetItem for
  the whole items it changes): it does not grow with the queue;
- a warm pass after an admission of 10 jobs, woken by a wake-up that names
  none (as one past wakeups.MOST_NAMED jobs does): it reads what the index
  holds changed since the previous pass, less the margin;
- for comparison, what a pass read before: the live index (whole items) in full.

Read units as DynamoDB bills them (tests/aws/capacity_units.py); wall time
on moto, which scans the table for every Query, so its seconds grow with
the table whatever a pass reads: 10,000 jobs take minutes, 100,000 about
half an hour.

Run from the repository root: python -m benchmarks.aws_pass_cost [--sizes 10000 100000]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run as a script, too

from gqa.adapters.aws import items as it  # noqa: E402
from gqa.adapters.aws import tables as t  # noqa: E402
from gqa.adapters.aws import wakeups  # noqa: E402
from gqa.adapters.aws.dynamodb_store import DynamoDBStore  # noqa: E402
from gqa.adapters.aws.resources import Pool  # noqa: E402
from gqa.models.job import JobState, Transition  # noqa: E402
from gqa.ports import Change  # noqa: E402
from tests.aws.capacity_units import CapacityUnits  # noqa: E402
from tests.aws.fake_batch import CONTEXT, NAMES, REGION, WAKEUP_EVENT, deployment  # noqa: E402
from tests.builders import job_record, spec  # noqa: E402

GPUS = 100
S = JobState


def fill(client: Any, queued: int, running: int, now: float) -> None:
    """`running` jobs on GPUs 0.., then `queued` waiting, as the store's codec writes them."""
    job_spec = spec(spot=True, resources={"gpus": 1})
    batch: list[dict[str, Any]] = []
    for n in range(1, running + queued + 1):
        is_running = n <= running
        record = job_record(spec=job_spec, id=str(n), group=str(n), seq=n, submitted_at=now - 3600,
                            state=S.RUNNING if is_running else S.QUEUED,
                            history=(Transition(S.SUBMITTED, now - 3600, "submitted"),
                                     Transition(S.QUEUED, now - 3600, "admitted")))
        if is_running:
            record = record.__class__(**{**record.__dict__, "assigned": (n - 1,), "started_at": now - 600,
                                         "attempts": 1, "proc_token": f"batch-{n}"})
        batch.append({"PutRequest": {"Item": it.dump(it.job_item(record, 1))}})
        if len(batch) == 25:
            _write(client, batch)
            batch = []
    if batch:
        _write(client, batch)


def _write(client: Any, batch: list[dict[str, Any]]) -> None:
    request = {NAMES.jobs: batch}
    while request:
        request = client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}


def measure(queued: int) -> list[tuple[str, float, int, float]]:
    """(pass, read units, calls, seconds) for each kind of pass at `queued` waiting jobs."""
    session = boto3.session.Session(region_name=REGION)
    units = CapacityUnits(NAMES).install(session)
    counting = [False]
    units.when = lambda: counting[0]
    calls: Counter[str] = Counter()
    session.events.register("before-call.dynamodb", lambda model, **_: calls.update(
        [model.name]) if counting[0] else None)
    out = []
    with deployment(now=time.time(), session=session, pools=(Pool("a10g", spot=True, max_gpus=GPUS, price=0.4),)) \
            as world:
        world.dispatch.container()                  # the cold start on an empty table
        client = world.client("dynamodb")
        fill(client, queued, GPUS, world.clock.now())
        writer = DynamoDBStore(client, NAMES)

        def run(name: str, event: dict[str, Any]) -> None:
            units.reset()
            calls.clear()
            counting[0] = True
            began = time.perf_counter()
            world.dispatch.handler(event, CONTEXT)
            seconds = time.perf_counter() - began
            counting[0] = False
            out.append((name, sum(units.reads.values()), sum(calls.values()), seconds))

        world.clock.advance(120)
        run("cold: the index whole", WAKEUP_EVENT)
        world.clock.advance(120)
        ended = "1"
        writer.apply([Change(ended, S.RUNNING, S.SUCCEEDED, "exit code 0", world.clock.now(),
                             {"ended_at": world.clock.now(), "assigned": ()})])
        body = wakeups.body([ended], writer.wakeup_items([ended]))
        run("warm, a settlement's wake-up", {"Records": [{**WAKEUP_EVENT["Records"][0], "body": body}]})
        world.clock.advance(120)
        for n in range(10):
            world.send(spec(name=f"late-{n}", spot=True, resources={"gpus": 1}))
        world.admit.handler({"Records": world.receive()}, CONTEXT)
        world.receive(url=world.urls.wakeup)          # admission's own wake-up names its jobs: dropped here
        run("warm, an admission's wake-up", WAKEUP_EVENT)

        units.reset()
        counting[0] = True
        began = time.perf_counter()
        kwargs: dict[str, Any] = {"TableName": NAMES.jobs, "IndexName": t.LIVE_INDEX,
                                  "KeyConditionExpression": "#l = :l", "ExpressionAttributeNames": {"#l": t.LIVE},
                                  "ExpressionAttributeValues": {":l": {"S": t.LIVE}}}
        pages = 0
        while True:
            page = client.query(**kwargs)
            pages += 1
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        counting[0] = False
        out.append(("before: the live index whole", sum(units.reads.values()), pages, time.perf_counter() - began))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="queued jobs")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    print(f"one dispatch pass, {GPUS} GPUs all busy (read units as DynamoDB bills them; seconds on moto):")
    print(f"  {'queued':>8}  {'pass':<32} {'read units':>11} {'calls':>6} {'seconds':>8}")
    for size in args.sizes:
        for name, reads, calls, seconds in measure(size):
            print(f"  {size:>8,}  {name:<32} {reads:>11,.1f} {calls:>6} {seconds:>8.2f}")


if __name__ == "__main__":
    main()
