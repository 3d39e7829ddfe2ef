"""Helpers for running the AWS adapters on moto, in-process."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3

REGION = "us-east-1"


@cache
def session() -> boto3.session.Session:
    """One session for every test client: it loads the service models once
    (a fresh default session per test costs most of a test's time). Clients
    made from it inside `mock_aws()` are served by moto."""
    from tests.aws.aws_limits import LIMITS

    made = boto3.session.Session(region_name=REGION, aws_access_key_id="testing",
                                 aws_secret_access_key="testing")
    LIMITS.install(made)   # what AWS refuses and moto does not (aws_limits.py)
    return made


class SerializedClient:
    """A client whose calls run one at a time across threads.

    moto's in-memory DynamoDB is not thread-safe (a transaction deep-copies a
    table while another thread writes it; ADD is a read-modify-write in Python).
    DynamoDB applies each request atomically; one lock around each call gives
    moto that same per-request atomicity, and nothing more, so concurrent
    stores still interleave between calls as they do against the service."""

    _lock = threading.RLock()

    def __init__(self, client: Any):
        self._client = client

    @property
    def meta(self) -> Any:
        return self._client.meta

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)
        return call


# -- looking at and steering a client's calls ---------------------------------------------------

def _event(client: Any, stage: str, operation: str) -> str:
    return f"{stage}.{client.meta.service_model.service_id.hyphenize()}.{operation}"


def capture(client: Any, operation: str = "*") -> list[dict[str, Any]]:
    """The parameters of every `operation` call the client makes from now on,
    as the caller built them (before botocore serialises them), so a test sees
    every field even where moto keeps only some."""
    calls: list[dict[str, Any]] = []
    client.meta.events.register(_event(client, "before-parameter-build", operation),
                                lambda params, model, **_: calls.append({"_operation": model.name, **params}))
    return calls


def refuse(client: Any, operation: str, code: str, times: int) -> list[str]:
    """Refuse the next `times` calls of `operation` with error `code`; returns
    the names of the calls refused."""
    from botocore.exceptions import ClientError

    refused: list[str] = []

    def hook(model: Any, **_: Any) -> None:
        if len(refused) < times:
            refused.append(model.name)
            raise ClientError({"Error": {"Code": code, "Message": "refused by the test"}}, model.name)
    client.meta.events.register(_event(client, "before-call", operation), hook)
    return refused


class _Http:
    status_code = 200
    headers: dict[str, str] = {}


def answer(client: Any, operation: str, parsed: dict[str, Any]) -> list[dict[str, Any]]:
    """Answer every `operation` call with `parsed` (a real-shaped response moto
    cannot give, e.g. a Batch job that FAILED); returns the requests answered."""
    asked: list[dict[str, Any]] = []

    def hook(params: Any, **_: Any) -> tuple[_Http, dict[str, Any]]:
        asked.append(params)
        return _Http(), parsed
    client.meta.events.register(_event(client, "before-call", operation), hook)
    return asked


class FakeClock:
    def __init__(self, now: float = 1_000_000.0):
        self.t = now

    def now(self) -> float:
        return self.t


def create_batch(aws_session: Any, pools: Any, job_definitions: tuple[str, ...] = ("gqa-train",)) -> None:
    """Batch as a deployment has it: one job queue per pool on its own compute
    environment, and the job definitions (moto runs nothing: the tests play Batch)."""
    batch = aws_session.client("batch")
    role = aws_session.client("iam").create_role(RoleName="batch", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    for pool in pools:
        env = batch.create_compute_environment(computeEnvironmentName=pool.name, type="UNMANAGED",
                                               state="ENABLED", serviceRole=role)
        order = [{"order": 1, "computeEnvironment": env["computeEnvironmentArn"]}]
        batch.create_job_queue(jobQueueName=pool.queue_name, state="ENABLED", priority=1, computeEnvironmentOrder=order)
    for name in job_definitions:   # tagged as the stacks tag everything they make (infra/stacks.py)
        batch.register_job_definition(jobDefinitionName=name, type="container", containerProperties={
            "image": "public.ecr.aws/gqa/train:1", "command": ["true"],
            "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "512"}]},
            tags={"gqa:deployment": "test"}, propagateTags=True)


@dataclass
class LambdaContext:
    """What Lambda passes as the context: the fields Powertools reads."""

    function_name: str = "gqa"
    memory_limit_in_mb: int = 256
    aws_request_id: str = "6f6d3c2e-0000-4000-8000-000000000000"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def emf(printed: str, namespace: str = "gqa") -> list[dict[str, Any]]:
    """The EMF documents (CloudWatch metrics) among the lines a function printed."""
    docs = []
    for line in printed.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            doc = json.loads(line)
            if doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == namespace:
                docs.append(doc)
    return docs


def metric(docs: list[dict[str, Any]], name: str, **dimensions: str) -> list[float]:
    """Every value of metric `name` in the documents whose dimensions, besides the
    service, are exactly `dimensions`, in order ([] if none)."""
    values: list[float] = []
    for doc in docs:
        [definition] = doc["_aws"]["CloudWatchMetrics"]
        [keys] = definition["Dimensions"]
        if set(keys) - {"service"} != set(dimensions) or any(doc[k] != v for k, v in dimensions.items()):
            continue
        if any(m["Name"] == name for m in definition["Metrics"]):
            value = doc[name]
            values += value if isinstance(value, list) else [value]
    return values
