"""What the deployed control plane costs a month, at rest and per job.

The resources come from the synthesized app (the deployment file cdk.json
names, or --config): alarms and the metrics in them, dashboards, KMS keys,
the schedules and the functions' memory; the calls per job, and DynamoDB's
read and write units as it bills them, come from the calls-per-job
benchmark, which runs jobs' whole lives on moto through the real handlers.
Prices are us-east-1 list prices (arm64 Lambda), below.
GPU instances, checkpoint storage and job logs are not the control plane's
and are left out.

Run from the repository root: python -m benchmarks.monthly_cost [--jobs-per-month N ...]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run as a script, too

from benchmarks.aws_calls_per_job import lives  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MONTH = 30 * 86400
LAMBDA_PER_REQUEST = 0.20 / 1e6
LAMBDA_PER_GB_SECOND_ARM = 0.0000133334
DYNAMODB_PER_WRITE_UNIT = 0.625 / 1e6
DYNAMODB_PER_READ_UNIT = 0.125 / 1e6
SQS_PER_REQUEST = 0.40 / 1e6
ALARM_PER_METRIC = 0.10           # standard resolution, per metric in the alarm, a month
DASHBOARD = 3.00                  # a month, past an account's first three
KMS_KEY = 1.00                    # a month
API_GATEWAY_PER_REQUEST = 3.50 / 1e6
# Lambda's SQS poller: about 5 long polls (20 s) in parallel per queue while it is empty
POLLS_PER_QUEUE = 5 * MONTH / 20
DURATION = 0.2                    # billed seconds per invocation, assumed
IDLE_BUDGET_CALLS = (3, 0)        # (reads, writes) of a budget tick with nothing running


def templates(config: str | None) -> dict[str, dict]:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from infra import build_app

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    if config:
        context["gqa:config-file"] = config
    assembly = build_app(context).synth()
    return {stack.stack_name: stack.template for stack in assembly.stacks}


def resources(stacks: dict[str, dict], kind: str) -> list[dict]:
    return [r for t in stacks.values() for r in t["Resources"].values() if r["Type"] == kind]


def fixed(stacks: dict[str, dict]) -> dict[str, float]:
    alarms = resources(stacks, "AWS::CloudWatch::Alarm")
    alarm_metrics = sum(len([m for m in a["Properties"].get("Metrics", []) if "MetricStat" in m]) or 1
                        for a in alarms)
    functions = {f["Properties"].get("FunctionName", ""): f["Properties"] for f in
                 resources(stacks, "AWS::Lambda::Function")}
    memory = {name.rsplit("-", 1)[-1]: props.get("MemorySize", 128) for name, props in functions.items()}
    ticks: Counter[str] = Counter()
    for rule in resources(stacks, "AWS::Events::Rule"):
        found = re.match(r"rate\((\d+) minutes?\)", rule["Properties"].get("ScheduleExpression", ""))
        if found:
            for target in rule["Properties"]["Targets"]:
                name = json.dumps(target["Arn"])
                which = "dispatch" if "Dispatch" in name else "budget" if "Budget" in name else "other"
                ticks[which] += MONTH / 60 / int(found.group(1))
    polled = len(resources(stacks, "AWS::Lambda::EventSourceMapping"))
    invocations = sum(ticks.values())
    gb_seconds = sum(n * memory.get(which, 512) / 1024 * DURATION for which, n in ticks.items())
    reads = ticks["dispatch"] * 1 + ticks["budget"] * IDLE_BUDGET_CALLS[0]
    return {
        f"{len(alarms)} alarms ({alarm_metrics} metrics)": alarm_metrics * ALARM_PER_METRIC,
        f"{len(resources(stacks, 'AWS::CloudWatch::Dashboard'))} dashboard(s)":
            DASHBOARD * len(resources(stacks, "AWS::CloudWatch::Dashboard")),
        f"{len(resources(stacks, 'AWS::KMS::Key'))} KMS key(s)": KMS_KEY * len(resources(stacks, "AWS::KMS::Key")),
        f"{int(invocations):,} scheduled invocations": invocations * LAMBDA_PER_REQUEST
        + gb_seconds * LAMBDA_PER_GB_SECOND_ARM + reads * DYNAMODB_PER_READ_UNIT,
        f"Lambda polling {polled} queues": polled * POLLS_PER_QUEUE * SQS_PER_REQUEST,
    }


def per_job(stacks: dict[str, dict], api_requests: float) -> dict[str, float]:
    logging.disable(logging.INFO)
    with contextlib.redirect_stdout(io.StringIO()):   # the functions' EMF metric lines
        life = lives(20, 3600)
    counts = Counter({k: n / life.jobs for k, n in life.per_job().items()})
    memory = {f["Properties"].get("FunctionName", "").rsplit("-", 1)[-1]: f["Properties"].get("MemorySize", 128)
              for f in resources(stacks, "AWS::Lambda::Function")}
    invocations = {f: n / life.jobs for f, n in life.invocations.items()}
    return {
        "Lambda": sum(n * (LAMBDA_PER_REQUEST + memory.get(f, 512) / 1024 * DURATION * LAMBDA_PER_GB_SECOND_ARM)
                      for f, n in invocations.items()),
        # the units DynamoDB bills (index writes included), as the calls-per-job benchmark counts them
        "DynamoDB": life.read_units() * DYNAMODB_PER_READ_UNIT + life.write_units() * DYNAMODB_PER_WRITE_UNIT,
        "SQS": sum(n for (s, _), n in counts.items() if s == "sqs") * SQS_PER_REQUEST,
        f"API Gateway ({api_requests:g} requests)": api_requests * API_GATEWAY_PER_REQUEST,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a deployment file (default: the one cdk.json names)")
    parser.add_argument("--jobs-per-month", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--api-requests-per-job", type=float, default=4,
                        help="a submit and a few status, queue or log reads (default 4)")
    args = parser.parse_args()
    stacks = templates(args.config)
    at_rest = fixed(stacks)
    print("at rest, a month:")
    for name, dollars in at_rest.items():
        print(f"  {name:<40} ${dollars:8.2f}")
    rest = sum(at_rest.values())
    print(f"  {'total':<40} ${rest:8.2f}")
    job = per_job(stacks, args.api_requests_per_job)
    print("per job:")
    for name, dollars in job.items():
        print(f"  {name:<40} ${dollars * 1e6:8.2f} per million jobs")
    each = sum(job.values())
    print(f"  {'total':<40} ${each * 1e6:8.2f} per million jobs")
    for jobs in args.jobs_per_month:
        print(f"{jobs:>10,} jobs a month: ${rest + each * jobs:,.2f}")


if __name__ == "__main__":
    main()
