"""AWS API calls per job on the serverless control plane, and what they cost.

Jobs' whole lives run in-process on moto through the real code: the api
function, handed POST /jobs as API Gateway sends it (ids reserved, the
submission sent to its intake queue) -> admit ->
dispatch (woken by admit) -> Batch's RUNNING and SUCCEEDED events ->
reconcile -> the dispatch pass each settlement wakes. Every call the control
plane makes is counted by service and operation with a botocore `before-call`
hook on the shared boto3 Session's events (the handlers build their clients
from it).

The headline figure is the average over a batch submitted together (20 jobs
by default, on a pool with a GPU for each): admit takes the intake messages
10 at a time (Lambda's default batch size) and wakes one pass per batch, the
jobs end at spread-out times over the next hour, and every settlement wakes
a pass of its own. Virtual time moves between them, so the containers'
caches (settings for SETTINGS_TTL seconds) expire as they would. Printed too:
one job alone, the same batch on a quarter as many GPUs (jobs wait, and each
settlement's pass starts the next one), and a scheduled pass with nothing to
do (a fixed cost per tick, not per job).

Not counted per job: calls made once per container at a cold start (e.g. the
dispatcher's set_inventory; printed separately), and the harness's own calls
(creating resources, reading messages off the queue in place of Lambda's
poller). Lambda's SQS poller (ReceiveMessage / DeleteMessage) is billed too
but is AWS's call, not ours, and is batched: noted, not counted.

Run from the repository root: python -m benchmarks.aws_calls_per_job
"""

from __future__ import annotations

import argparse
import heapq
import logging
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run as a script, too

from gqa.adapters.aws.resources import Pool  # noqa: E402
from tests.aws.fake_batch import CONTEXT, REGION, WAKEUP_EVENT, FakeBatch, deployment  # noqa: E402
from tests.builders import spec  # noqa: E402

# list prices (us-east-1), from the spot data README
LAMBDA_PER_REQUEST = 0.20 / 1e6
LAMBDA_PER_GB_SECOND = 0.0000166667
DYNAMODB_PER_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_PER_READ_UNIT = 0.125 / 1e6
SQS_PER_REQUEST = 0.40 / 1e6
DYNAMODB_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems", "DescribeTable"})
ADMIT_BATCH = 10          # records per admit invocation (the event source mapping's default batch size)
SCHEDULE_EVENT = {"version": "0", "id": "tick", "detail-type": "Scheduled Event", "source": "aws.events",
                  "account": "123456789012", "time": "2024-01-01T00:00:00Z", "region": REGION,
                  "resources": ["arn:aws:events:us-east-1:123456789012:rule/gqa-dispatch-tick"], "detail": {}}
STEPS = ("submit (the API)", "admit", "dispatch", "reconcile RUNNING", "reconcile SUCCEEDED", "pass after it")


class Calls:
    """Counts every call made through the session's clients, under the phase
    the harness says it is in (None: the harness's own, not counted)."""

    def __init__(self, session: boto3.session.Session):
        self.phase: str | None = None
        self.by_phase: dict[str, Counter[tuple[str, str]]] = {}
        # registered before any client exists: a client copies the session's hooks when built
        session.events.register("before-call", self._seen)

    def _seen(self, model: Any, **_: Any) -> None:
        if self.phase is not None:
            service = model.service_model.service_id.hyphenize()
            self.by_phase.setdefault(self.phase, Counter())[(service, model.name)] += 1

    def count(self, *phases: str) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for phase in phases:
            out += self.by_phase.get(phase, Counter())
        return out


@dataclass
class Life:
    """What a run of job lives cost."""

    jobs: int
    calls: Calls
    invocations: Counter[str] = field(default_factory=Counter)   # function -> invocations
    idle_pass: Counter[tuple[str, str]] = field(default_factory=Counter)

    def step(self, name: str) -> float:
        return sum(self.calls.count(name).values()) / self.jobs

    def per_job(self) -> Counter[tuple[str, str]]:
        return self.calls.count(*STEPS)

    def per_job_total(self) -> float:
        return sum(self.per_job().values()) / self.jobs


def lives(jobs: int, job_seconds: float, *, gpus: int | None = None, seed: int = 1) -> Life:
    """`jobs` submitted together, each running about `job_seconds`, on a spot
    pool of `gpus` GPUs (default: one per job; fewer, and jobs wait their turn)."""
    rng = random.Random(seed)
    session = boto3.session.Session(region_name=REGION)
    calls = Calls(session)
    life = Life(jobs, calls)
    pools = (Pool("a10g", spot=True, max_gpus=gpus or jobs, price=0.4),)
    events: list[tuple[float, int, str, Any]] = []    # (time, tie-break, Batch status, job): what Batch will say

    with deployment(now=time.time(), session=session, pools=pools) as world:
        # cold starts: each function's container builds its wiring once
        calls.phase = "cold start"
        dispatcher = world.dispatch.dispatcher()
        world.admit.admission()
        world.reconcile.service()
        world.api.wiring()
        batch = FakeBatch(dispatcher.compute.client)

        def dispatch(phase: str) -> None:
            calls.phase = phase
            world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
            life.invocations["dispatch"] += 1
            for job in batch.take_new():  # Batch runs what was submitted
                begin = world.clock.now() + 20
                heapq.heappush(events, (begin, len(events), "RUNNING", (job, begin)))
                heapq.heappush(events, (begin + job_seconds * rng.uniform(0.5, 1.5), len(events), "SUCCEEDED",
                                        (job, begin)))

        calls.phase = "submit (the API)"
        for i in range(jobs):
            world.send(spec(name=f"bench-{i}", spot=True, resources={"gpus": 1}))
            life.invocations["api"] += 1
        calls.phase = None
        records = world.receive()         # in place of Lambda's poller
        for start in range(0, len(records), ADMIT_BATCH):
            calls.phase = "admit"
            world.admit.handler({"Records": records[start:start + ADMIT_BATCH]}, CONTEXT)
            life.invocations["admit"] += 1
            dispatch("dispatch")          # the wake-up that admit sent
        while events:
            at, _, status, (job, begin) = heapq.heappop(events)
            world.clock.advance(at - world.clock.now())
            calls.phase = f"reconcile {status}"
            world.reconcile.handler(FakeBatch.event(job, status, at=at, started=begin,
                                                    exit_code=0 if status == "SUCCEEDED" else None), CONTEXT)
            life.invocations["reconcile"] += 1
            if status == "SUCCEEDED":
                dispatch("pass after it")  # the wake-up the settlement sent: it starts what waits
        assert len(batch.submitted) == jobs, f"{len(batch.submitted)} of {jobs} jobs started"

        # a scheduled tick later on, with nothing left to do: a fixed cost per tick, not per job
        world.clock.advance(600)
        calls.phase = "idle"
        world.dispatch.handler(SCHEDULE_EVENT, CONTEXT)
        calls.phase = None
        life.idle_pass = calls.count("idle")
    return life


def cost(counts: Counter[tuple[str, str]], invocations: float, memory_mb: int, duration_s: float) -> dict[str, float]:
    dynamo_writes = sum(n for (s, op), n in counts.items() if s == "dynamodb" and op not in DYNAMODB_READS)
    dynamo_reads = sum(n for (s, op), n in counts.items() if s == "dynamodb" and op in DYNAMODB_READS)
    sqs = sum(n for (s, _), n in counts.items() if s == "sqs")
    return {
        "Lambda requests": invocations * LAMBDA_PER_REQUEST,
        "Lambda GB-seconds": invocations * memory_mb / 1024 * duration_s * LAMBDA_PER_GB_SECOND,
        "DynamoDB writes": dynamo_writes * DYNAMODB_PER_WRITE_UNIT,
        "DynamoDB reads": dynamo_reads * DYNAMODB_PER_READ_UNIT,
        "SQS requests": sqs * SQS_PER_REQUEST,
    }


def table(title: str, counts: Counter[tuple[str, str]], per: int = 1) -> None:
    print(f"{title}:")
    for (service, operation), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {service:<10} {operation:<22} {n / per:>6.2f}")
    print(f"  {'total':<33} {sum(counts.values()) / per:>6.2f}")


def by_step(life: Life) -> str:
    return ", ".join(f"{name} {life.step(name):.2f}" for name in STEPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20, help="jobs submitted together (default 20)")
    parser.add_argument("--memory-mb", type=int, default=128, help="each function's memory (default 128)")
    parser.add_argument("--duration", type=float, default=0.2,
                        help="assumed billed seconds per invocation (default 0.2)")
    parser.add_argument("--job-seconds", type=float, default=3600,
                        help="the jobs' mean run time; they end spread over 0.5-1.5 times it (default 3600)")
    parser.add_argument("--tick-seconds", type=float, default=60,
                        help="the dispatcher's schedule, for the idle cost per hour (default 60)")
    args = parser.parse_args()
    logging.disable(logging.INFO)      # the handlers' JSON log lines would bury the table
    alone = lives(1, args.job_seconds)
    batch = lives(args.jobs, args.job_seconds)
    queued = lives(args.jobs, args.job_seconds, gpus=max(1, args.jobs // 4))

    table("calls once per container (cold start, not per job)", batch.calls.count("cold start"))
    table(f"calls per job, {args.jobs} jobs submitted together (average)", batch.per_job(), per=args.jobs)
    print(f"per job, by step ({args.jobs} together): {by_step(batch)}")
    print(f"one job alone, by step: {by_step(alone)}; total {alone.per_job_total():.0f}")
    print(f"{args.jobs} jobs on {max(1, args.jobs // 4)} GPUs (most wait for a free one; the pass a settlement "
          f"wakes starts the next), by step: {by_step(queued)}; total {queued.per_job_total():.1f}")
    idle = sum(batch.idle_pass.values())
    print(f"an idle scheduled pass: {idle} call(s) "
          f"({', '.join(f'{s} {op}' for s, op in batch.idle_pass)}); at one tick every {args.tick_seconds:g} s, "
          f"{idle * 3600 / args.tick_seconds:.0f} calls per hour with no job at all")
    invocations = sum(batch.invocations.values()) / args.jobs
    print(f"Lambda invocations per job: {invocations:.2f} (API Gateway's request for the api function not priced) "
          f"({', '.join(f'{f} {n / args.jobs:.2f}' for f, n in batch.invocations.items())})")
    by_service: Counter[str] = Counter()
    for (service, _), n in batch.per_job().items():
        by_service[service] += n
    print("by service, per job: " + ", ".join(f"{s} {n / args.jobs:.2f}" for s, n in by_service.most_common()))
    per_job = Counter({k: n / args.jobs for k, n in batch.per_job().items()})
    prices = cost(per_job, invocations, args.memory_mb, args.duration)
    print(f"control-plane cost per job (list prices; Lambda at {args.memory_mb} MB x {args.duration:g} s per "
          f"invocation; DynamoDB counted as 1 unit per call, i.e. items under 1 KB written / 4 KB read and a "
          f"transaction as one call though DynamoDB bills transactional units double; SQS 1 request per call; "
          f"Lambda's own SQS polling not included):")
    for name, dollars in prices.items():
        print(f"  {name:<20} ${dollars:.9f}")
    total = sum(prices.values())
    print(f"  {'total':<20} ${total:.9f}  (${total * 1e6:.2f} per million jobs)")
    print(f"calls per job: {batch.per_job_total():.1f}")


if __name__ == "__main__":
    main()
