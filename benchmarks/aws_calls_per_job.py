"""AWS API calls per job on the serverless control plane, and what they cost.

One job's whole life runs in-process on moto through the real handlers: the
submission message is sent -> admit -> dispatch (woken by admit) -> Batch's
RUNNING and SUCCEEDED events -> reconcile. Every call the control plane makes
is counted by service and operation with a botocore `before-call` hook on the
shared boto3 Session's events (the handlers build their clients from it).

Not counted per job: calls made once per container at a cold start (e.g. the
dispatcher's set_inventory; printed separately), and the test harness's own
calls (creating resources, reading the message off the queue in place of
Lambda's poller). Lambda's SQS poller (ReceiveMessage / DeleteMessage) is
billed too but is AWS's call, not ours, and is batched: noted, not counted.

Run from the repository root: python -m benchmarks.aws_calls_per_job
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

from tests.aws.fake_batch import REGION, CONTEXT, WAKEUP_EVENT, FakeBatch, deployment  # noqa: E402
from tests.builders import spec  # noqa: E402

# list prices (us-east-1), from the spot data README
LAMBDA_PER_REQUEST = 0.20 / 1e6
LAMBDA_PER_GB_SECOND = 0.0000166667
DYNAMODB_PER_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_PER_READ_UNIT = 0.125 / 1e6
SQS_PER_REQUEST = 0.40 / 1e6
DYNAMODB_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems", "DescribeTable"})


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

    def count(self, phase: str) -> Counter[tuple[str, str]]:
        """The calls of `phase`, or of every phase under it ("per job" sums "per job: admit", ...)."""
        out: Counter[tuple[str, str]] = Counter()
        for name, counts in self.by_phase.items():
            if name == phase or name.startswith(phase + ": "):
                out += counts
        return out


def one_job(seconds: float) -> tuple[Calls, list[tuple[str, str]]]:
    """Run one job's life; returns the counts and the invocations made, as (function, what woke it)."""
    session = boto3.session.Session(region_name=REGION)
    calls = Calls(session)
    invocations: list[tuple[str, str]] = []
    with deployment(now=time.time(), session=session) as world:
        # cold starts: each function's container builds its wiring once
        calls.phase = "cold start"
        dispatcher = world.dispatch.dispatcher()
        world.admit.admission()
        world.reconcile.service()
        batch = FakeBatch(dispatcher.compute.client)

        calls.phase = "per job: submit (the API)"
        world.send(spec(name="bench", spot=True, resources={"gpus": 1}))
        calls.phase = None
        records = world.receive()         # in place of Lambda's poller
        calls.phase = "per job: admit"
        world.admit.handler({"Records": records}, CONTEXT)
        invocations.append(("admit", "intake message"))
        calls.phase = "per job: dispatch"
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        invocations.append(("dispatch", "wake-up from admit"))
        [job] = batch.take_new()
        started = world.clock.now() + 20
        for event in (FakeBatch.event(job, "RUNNING", at=started, started=started),
                      FakeBatch.event(job, "SUCCEEDED", at=started + seconds, started=started, exit_code=0)):
            calls.phase = f"per job: reconcile {event['detail']['status']}"
            world.reconcile.handler(event, CONTEXT)
            invocations.append(("reconcile", event["detail"]["status"]))

        # the wake-up the settlement sent: a pass that schedules others onto the freed GPUs;
        # shared by every job it serves, so shown on its own
        calls.phase = "follow-up pass"
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        calls.phase = None
    return calls, invocations


def cost(counts: Counter[tuple[str, str]], invocations: int, memory_mb: int, duration_s: float) -> dict[str, float]:
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


def table(title: str, counts: Counter[tuple[str, str]]) -> None:
    print(f"{title}:")
    for (service, operation), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {service:<10} {operation:<22} {n:>3}")
    print(f"  {'total':<33} {sum(counts.values()):>3}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memory-mb", type=int, default=128, help="each function's memory (default 128)")
    parser.add_argument("--duration", type=float, default=0.2,
                        help="assumed billed seconds per invocation (default 0.2)")
    parser.add_argument("--job-seconds", type=float, default=3600, help="the job's run time (no effect on calls)")
    args = parser.parse_args()
    logging.disable(logging.INFO)      # the handlers' JSON log lines would bury the table
    calls, invocations = one_job(args.job_seconds)

    table("calls once per container (cold start, not per job)", calls.count("cold start"))
    table("follow-up dispatch pass woken by the settlement (shared by the jobs it schedules)",
          calls.count("follow-up pass"))
    per_job = calls.count("per job")
    table("calls per job (submit message -> admit -> dispatch -> RUNNING -> SUCCEEDED)", per_job)
    print("per job, by step: " + ", ".join(f"{name.removeprefix('per job: ')} {sum(c.values())}"
                                             for name, c in calls.by_phase.items() if name.startswith("per job: ")))
    print(f"Lambda invocations per job: {len(invocations)} ({', '.join(f'{f}: {w}' for f, w in invocations)})")
    by_service = Counter()
    for (service, _), n in per_job.items():
        by_service[service] += n
    print("by service: " + ", ".join(f"{s} {n}" for s, n in by_service.most_common()))
    prices = cost(per_job, len(invocations), args.memory_mb, args.duration)
    print(f"control-plane cost per job (list prices; Lambda at {args.memory_mb} MB x {args.duration:g} s per "
          f"invocation; DynamoDB counted as 1 unit per call, i.e. items under 1 KB written / 4 KB read and a "
          f"transaction as one call though DynamoDB bills transactional units double; SQS 1 request per call; "
          f"Lambda's own SQS polling not included):")
    for name, dollars in prices.items():
        print(f"  {name:<20} ${dollars:.9f}")
    total = sum(prices.values())
    print(f"  {'total':<20} ${total:.9f}  (${total * 1e6:.2f} per million jobs)")
    print(f"calls per job: {sum(per_job.values())}")


if __name__ == "__main__":
    main()
