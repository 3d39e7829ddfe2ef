"""AWS API calls per job on the serverless control plane, and what they cost.

Jobs' whole lives run in-process on moto through the real code: the api
function, handed POST /jobs as API Gateway sends it (ids reserved, the
submission sent to its intake queue) -> admit ->
dispatch (woken by admit) -> Batch's RUNNING and SUCCEEDED events ->
reconcile -> the dispatch pass each settlement wakes, handed the wake-up
messages that were sent. Every call the control plane makes is counted by
service and operation with a botocore hook on the shared boto3 Session's
events (the handlers build their clients from it). Batch's SubmitJob is
answered in place of moto's Batch (answer_submit_job), so a large array fits.

The headline figure is the average over a batch submitted together (20 jobs
by default, on a pool with a GPU for each): admit takes the intake messages
10 at a time (Lambda's default batch size) and wakes one pass per batch, the
jobs end at spread-out times over the next hour, and every settlement wakes
a pass of its own. Virtual time moves between them, so the containers'
caches (settings for SETTINGS_TTL seconds) expire as they would. Printed too:
one job alone, the same batch on a quarter as many GPUs (jobs wait, and each
settlement's pass starts the next one), and a scheduled pass with nothing to
do (a fixed cost per tick, not per job).

DynamoDB's read and write units are counted as DynamoDB bills them
(tests/aws/capacity_units.py: 4 KB a read unit, halved for eventually
consistent and index reads, index reads by their projection; 1 KB a write
unit, transactions double, plus a write to each index the item is on), and
the control plane's dollars per job are set beside the GPU cost of a
one-hour job on a g5.xlarge (one A10G) at its on-demand price. Cases: one
job alone, 20 together on a GPU each, the 20 on 5 GPUs, and one array of
200 tasks on 20 GPUs (--array-tasks, --array-gpus). An array's tasks cost
what the 200's do at any size: past its submission and admission (0.03
calls a task here, less in a larger one) every task is its own start,
events and pass. `--array-tasks 10000` runs a 10,000-task array (its four
chunks admitted as the intake queue hands each on; moto kept lean by
tests/aws/lean_moto.py), but slowly: each settlement's pass plans over the
thousands still waiting, on one core, and moto scans its table for every
Query, so 4,000 of its tasks' lives take half an hour here. A 2,000-task
array (one chunk) takes five minutes; benchmarks/aws_pass_cost.py
measures single passes at 10,000 and 100,000 queued jobs.

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
import json
import logging
import random
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run as a script, too

from gqa.adapters.aws.resources import Pool  # noqa: E402
from tests.aws.capacity_units import CapacityUnits  # noqa: E402
from tests.aws.fake_batch import CONTEXT, NAMES, REGION, FakeBatch, deployment  # noqa: E402
from tests.builders import spec  # noqa: E402

# list prices (us-east-1), from the spot data README
LAMBDA_PER_REQUEST = 0.20 / 1e6
LAMBDA_PER_GB_SECOND = 0.0000166667
DYNAMODB_PER_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_PER_READ_UNIT = 0.125 / 1e6
SQS_PER_REQUEST = 0.40 / 1e6
G5_XLARGE_PER_HOUR = 1.006   # on demand, us-east-1: one A10G
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
        # registered before any client exists: a client copies the session's hooks when built; before
        # the parameters are built, so a call answered without the network (answer_submit_job) counts too
        session.events.register("before-parameter-build", self._seen)

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
    units: CapacityUnits
    invocations: Counter[str] = field(default_factory=Counter)   # function -> invocations
    idle_pass: Counter[tuple[str, str]] = field(default_factory=Counter)

    def read_units(self) -> float:
        return sum(self.units.reads.values()) / self.jobs

    def write_units(self) -> float:
        return sum(self.units.writes.values()) / self.jobs

    def step(self, name: str) -> float:
        return sum(self.calls.count(name).values()) / self.jobs

    def per_job(self) -> Counter[tuple[str, str]]:
        return self.calls.count(*STEPS)

    def per_job_total(self) -> float:
        return sum(self.per_job().values()) / self.jobs


def lives(jobs: int, job_seconds: float, *, gpus: int | None = None, seed: int = 1, array: bool = False) -> Life:
    """`jobs` submitted together (`array`: as one array of that many tasks),
    each running about `job_seconds`, on a spot pool of `gpus` GPUs
    (default: one per job; fewer, and jobs wait their turn)."""
    rng = random.Random(seed)
    session = boto3.session.Session(region_name=REGION)
    calls = Calls(session)
    units = CapacityUnits(NAMES).install(session)
    units.when = lambda: calls.phase in STEPS
    life = Life(jobs, calls, units)
    pools = (Pool("a10g", spot=True, max_gpus=gpus or jobs, price=0.4),)
    events: list[tuple[float, int, str, Any]] = []    # (time, tie-break, Batch status, job): what Batch will say

    with deployment(now=time.time(), session=session, pools=pools) as world:
        # cold starts: each function's container builds its wiring once
        calls.phase = "cold start"
        dispatcher = world.dispatch.container()
        answer_submit_job(dispatcher.compute.client)
        world.admit.container()
        world.reconcile.container()
        world.api.container()
        batch = FakeBatch(dispatcher.compute.client)

        def dispatch(phase: str) -> None:
            calls.phase = None
            woken = world.wakeups()         # the messages that woke it, in place of Lambda's poller
            calls.phase = phase
            world.dispatch.handler(woken, CONTEXT)
            life.invocations["dispatch"] += 1
            for job in batch.take_new():  # Batch runs what was submitted
                begin = world.clock.now() + 20
                heapq.heappush(events, (begin, len(events), "RUNNING", (job, begin)))
                heapq.heappush(events, (begin + job_seconds * rng.uniform(0.5, 1.5), len(events), "SUCCEEDED",
                                        (job, begin)))

        calls.phase = "submit (the API)"
        for i in range(1 if array else jobs):
            world.send(spec(name=f"bench-{i}", spot=True, resources={"gpus": 1},
                            **({"array": f"0-{jobs - 1}"} if array else {})))
            life.invocations["api"] += 1
        calls.phase = None
        records = world.receive()         # in place of Lambda's poller
        while records:
            for start in range(0, len(records), ADMIT_BATCH):
                calls.phase = "admit"
                world.admit.handler({"Records": records[start:start + ADMIT_BATCH]}, CONTEXT)
                life.invocations["admit"] += 1
                dispatch("dispatch")          # the wake-up that admit sent
            calls.phase = None
            records = world.receive()     # a large array's continuations: its next chunk each
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


def answer_submit_job(client: Any) -> None:
    """Answer SubmitJob as Batch would, without moto's Batch, which keeps a
    thread per job (a 10,000-task array would take many GB): the call is
    still made through the client, counted, and watched by FakeBatch."""
    def answer(model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        job_id = str(uuid.uuid4())
        body = json.loads(params["body"])
        return AWSResponse("https://batch", 200, {}, None), {
            "jobId": job_id, "jobName": body["jobName"],
            "jobArn": f"arn:aws:batch:{REGION}:123456789012:job/{job_id}"}
    client.meta.events.register_last("before-call.batch.SubmitJob", answer)


def cost(life: Life, memory_mb: int, duration_s: float) -> dict[str, float]:
    """Dollars per job: Lambda, DynamoDB by its billed units, SQS by requests."""
    invocations = sum(life.invocations.values()) / life.jobs
    sqs = sum(n for (s, _), n in life.per_job().items() if s == "sqs") / life.jobs
    return {
        "Lambda requests": invocations * LAMBDA_PER_REQUEST,
        "Lambda GB-seconds": invocations * memory_mb / 1024 * duration_s * LAMBDA_PER_GB_SECOND,
        "DynamoDB writes": life.write_units() * DYNAMODB_PER_WRITE_UNIT,
        "DynamoDB reads": life.read_units() * DYNAMODB_PER_READ_UNIT,
        "SQS requests": sqs * SQS_PER_REQUEST,
    }


def case_line(name: str, life: Life, memory_mb: int, duration_s: float) -> str:
    dollars = sum(cost(life, memory_mb, duration_s).values())
    return (f"  {name:<34} {life.per_job_total():>6.1f} {life.read_units():>7.2f} {life.write_units():>7.2f} "
            f"${dollars:.8f}  1/{G5_XLARGE_PER_HOUR / dollars:,.0f}")


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
    parser.add_argument("--array-tasks", type=int, default=200, help="tasks of the array case (default 200)")
    parser.add_argument("--array-gpus", type=int, default=20, help="GPUs of the array case (default 20)")
    args = parser.parse_args()
    logging.disable(logging.INFO)      # the handlers' JSON log lines would bury the table
    alone = lives(1, args.job_seconds)
    batch = lives(args.jobs, args.job_seconds)
    queued = lives(args.jobs, args.job_seconds, gpus=max(1, args.jobs // 4))
    sweep = lives(args.array_tasks, args.job_seconds, gpus=args.array_gpus, array=True)

    table("calls once per container (cold start, not per job)", batch.calls.count("cold start"))
    table(f"calls per job, {args.jobs} jobs submitted together (average)", batch.per_job(), per=args.jobs)
    print(f"per job, by step ({args.jobs} together): {by_step(batch)}")
    print(f"one job alone, by step: {by_step(alone)}; total {alone.per_job_total():.0f}")
    print(f"{args.jobs} jobs on {max(1, args.jobs // 4)} GPUs (most wait for a free one; the pass a settlement "
          f"wakes starts the next), by step: {by_step(queued)}; total {queued.per_job_total():.1f}")
    print(f"one {args.array_tasks:,}-task array on {args.array_gpus:,} GPUs, by step: {by_step(sweep)}; "
          f"total {sweep.per_job_total():.1f}")
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
    prices = cost(batch, args.memory_mb, args.duration)
    print(f"control-plane cost per job, {args.jobs} together (list prices; Lambda at {args.memory_mb} MB x "
          f"{args.duration:g} s per invocation; DynamoDB by the units it bills, index writes included; SQS 1 "
          f"request per call; Lambda's own SQS polling not included):")
    for name, dollars in prices.items():
        print(f"  {name:<20} ${dollars:.9f}")
    total = sum(prices.values())
    print(f"  {'total':<20} ${total:.9f}  (${total * 1e6:.2f} per million jobs)")
    print(f"per job, each case side by side (control plane's dollars against a one-hour job's GPU on a g5.xlarge, "
          f"${G5_XLARGE_PER_HOUR}/hour on demand; goals: at most 10 calls, at most 1/10,000):")
    print(f"  {'case':<34} {'calls':>6} {'RCU':>7} {'WCU':>7} {'dollars':<11}  share of the GPU-hour")
    for name, life in (("one job alone", alone), (f"{args.jobs} together", batch),
                       (f"{args.jobs} on {max(1, args.jobs // 4)} GPUs", queued),
                       (f"one {args.array_tasks:,}-task array, {args.array_gpus:,} GPUs", sweep)):
        print(case_line(name, life, args.memory_mb, args.duration))
    print(f"calls per job: {batch.per_job_total():.1f}")


if __name__ == "__main__":
    main()
