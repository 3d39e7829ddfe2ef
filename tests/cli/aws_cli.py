"""The `gqa` CLI against a whole deployment on moto (tests/aws/fake_batch.py):
the CLI's ApiClient signs each request with the caller's keys, and API
Gateway's part (tests/aws/api_gateway.py) checks the signature and hands the
api function the REST proxy event; the tests play Lambda's poller and Batch."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from cli.main import main
from gqa.adapters.aws import api_client
from gqa.adapters.aws.batch_logs import DEFAULT_GROUP
from tests.aws.api_gateway import ENDPOINT, FakeApiGateway
from tests.aws.fake_batch import CONTEXT, WAKEUP_EVENT, FakeBatch, Submitted, deployment


class AwsCli:
    def __init__(self, world, gateway: FakeApiGateway, capsys, monkeypatch):
        self.world, self.gateway, self.capsys, self.monkeypatch = world, gateway, capsys, monkeypatch
        self.batch = FakeBatch(world.dispatch.container().compute.client)
        self.started: dict[str, float] = {}     # Batch job id -> when its container started

    def __call__(self, who: str, *args: str, secret: str | None = None) -> tuple[int, str, str]:
        """`gqa ARGS` run by `who`: their keys in the environment, as the AWS CLI would have them."""
        caller = self.gateway.callers.get(f"AKIA{who.upper():X<16}"[:20]) or self.gateway.add(who)
        self.monkeypatch.setenv("AWS_ACCESS_KEY_ID", caller.access_key)
        self.monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret or caller.secret)
        self.monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        self.capsys.readouterr()
        code = main(list(args))
        out = self.capsys.readouterr()
        # the functions run in this process: their metrics (EMF lines, CloudWatch Logs' on AWS) are not the CLI's
        printed = "".join(line for line in out.out.splitlines(keepends=True) if not line.startswith('{"_aws"'))
        return code, printed, out.err

    def json(self, who: str, *args: str):
        args = list(args)
        cut = args.index("--") if "--" in args else len(args)
        code, out, err = self(who, *args[:cut], "-o", "json", *args[cut:])
        assert code == 0, err
        return json.loads(out)

    def admit(self) -> None:
        records = [r for tier in (0, 1, 2) for r in self.world.receive(tier)]
        assert self.world.admit.handler({"Records": records}, CONTEXT) == {"batchItemFailures": []}

    def dispatch(self) -> list[Submitted]:
        self.world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        return self.batch.take_new()

    def reconcile(self, submitted: Submitted, status: str, **kw: Any) -> None:
        # Batch's startedAt is when the container started (its first event here), in every later event too
        started = self.started.setdefault(submitted.batch_job_id, self.world.clock.now())
        event = FakeBatch.event(submitted, status, at=self.world.clock.now(), started=started, **kw)
        self.world.reconcile.handler(event, CONTEXT)

    def write_log(self, submitted: Submitted, *lines: str) -> str:
        """What the awslogs driver does for the attempt's container: one event per
        line, on the stream Batch named (moto names it, runs nothing). Returns the stream."""
        [described] = self.world.client("batch").describe_jobs(jobs=[submitted.batch_job_id])["jobs"]
        stream = described["container"]["logStreamName"]
        logs = self.world.client("logs")
        if not logs.describe_log_streams(logGroupName=DEFAULT_GROUP, logStreamNamePrefix=stream)["logStreams"]:
            logs.create_log_stream(logGroupName=DEFAULT_GROUP, logStreamName=stream)
        now = int(time.time() * 1000)
        logs.put_log_events(logGroupName=DEFAULT_GROUP, logStreamName=stream,
                            logEvents=[{"timestamp": now + i, "message": line} for i, line in enumerate(lines)])
        return stream


def aws_cli(monkeypatch, capsys, home) -> Iterator[AwsCli]:
    """A deployment (its api function's roles: fake_batch.ACCESS) and the CLI pointed at it."""
    with deployment(now=time.time()) as world:
        world.dispatch.container()      # its cold start registers the pools' GPUs
        gateway = FakeApiGateway(world.api.handler)
        monkeypatch.setattr(api_client, "urllib_transport", gateway)   # HTTPS -> API Gateway's part
        monkeypatch.setenv("GQA_HOME", str(home))
        monkeypatch.chdir(home)
        monkeypatch.setenv("GQA_BACKEND", "aws")
        monkeypatch.setenv("GQA_API_ENDPOINT", ENDPOINT)
        yield AwsCli(world, gateway, capsys, monkeypatch)
