"""The AWS tests' moto tables and queues, made from the data stack's
synthesized CloudFormation template: each table's keys, indexes, billing and
TTL, each queue's attributes and redrive are the ones a deployment gets, so no
test passes against a table or a queue that differs from the deployed one.

The template is synthesized once per session for the deployment cdk.json
names (a few seconds) and kept in build/ under a hash of what it is built
from, so later runs read it back. Names come from each test (its own prefix):
a resource's role is its template name less the deployment's prefix
("gqa-dev-jobs" -> "jobs", "gqa-dev-intake-high-dlq" -> "intake-high-dlq")."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gqa.adapters.aws.resources import INTAKE, QUEUES, TRIGGER_TIMER, WAKEUP, QueueUrls
from gqa.adapters.aws.tables import TableNames

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "test-templates"

# Template properties passed to CreateTable as they are, and the others this
# module reads (name, TTL) or that have no bearing on what the adapters read or
# write. Any other property fails loudly, so a new one is either carried over
# to moto or declared irrelevant here.
_TABLE_ARGUMENTS = ("KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes", "BillingMode")
_TABLE_IGNORED = ("TableName", "TimeToLiveSpecification", "SSESpecification", "PointInTimeRecoverySpecification",
                  "DeletionProtectionEnabled", "Tags")
# The same for queues: these become CreateQueue attributes (SQS wants strings).
_QUEUE_ATTRIBUTES = ("VisibilityTimeout", "MessageRetentionPeriod", "MaximumMessageSize",
                     "ReceiveMessageWaitTimeSeconds", "DelaySeconds", "SqsManagedSseEnabled", "FifoQueue",
                     "ContentBasedDeduplication")
_QUEUE_IGNORED = ("QueueName", "RedrivePolicy", "Tags")   # the redrive is rebuilt with moto's ARN


@dataclass(frozen=True)
class TableDefinition:
    role: str                     # "jobs", "settings", "ledger": TableNames' field
    arguments: dict[str, Any]     # CreateTable's, less TableName
    ttl: str | None               # the attribute TTL deletes items by


@dataclass(frozen=True)
class QueueDefinition:
    logical_id: str               # in the template (what a redrive points at)
    role: str                     # "intake-high", "intake-high-dlq"
    attributes: dict[str, str]    # CreateQueue's, less the redrive
    dead_letter: str | None       # its dead-letter queue's logical id
    max_receive_count: int | None


# -- the template -------------------------------------------------------------------------------

@functools.cache
def data_template() -> dict[str, Any]:
    """{"prefix": the deployment's resource prefix, "template": the data stack's CloudFormation}."""
    path = CACHE / f"data-{_fingerprint()}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    synthesized = _synthesize()
    _store(path, synthesized)
    return synthesized


def _synthesize() -> dict[str, Any]:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from gqa.models.deployment import deployment_from_context
    from infra.stacks import DataStack, stack_names

    # cdk.json's context, as `cdk synth` gives it to the app; the data stack alone
    # (no functions to bundle, no cdk-nag pass: tests/infra checks those)
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    config = deployment_from_context(context, base_dir=ROOT)
    app = cdk.App(context=context)
    stack = DataStack(app, stack_names(config)[0], config=config)
    return {"prefix": config.prefix, "template": Template.from_stack(stack).to_json()}


def _fingerprint() -> str:
    """A hash of everything the data stack's template is made from."""
    digest = hashlib.sha256()
    files = [ROOT / "cdk.json", ROOT / "examples" / "deployment.yaml", Path(__file__),
             *(path for package in ("infra", "gqa", "lambdas") for path in sorted((ROOT / package).rglob("*.py")))]
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    for package in ("aws-cdk-lib", "constructs"):
        digest.update(f"{package}=={importlib.metadata.version(package)}\0".encode())
    return digest.hexdigest()[:16]


def _store(path: Path, synthesized: dict[str, Any]) -> None:
    """Written whole or not at all (concurrent runs each write their own file
    and rename it into place); older fingerprints are removed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
            json.dump(synthesized, out)
        os.replace(out.name, path)
        for old in path.parent.glob("data-*.json"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass   # a read-only checkout synthesizes every session


def _resources(kind: str) -> list[tuple[str, dict[str, Any]]]:
    resources = data_template()["template"]["Resources"]
    return [(logical_id, r.get("Properties", {})) for logical_id, r in resources.items() if r["Type"] == kind]


def _role(name: str) -> str:
    prefix = data_template()["prefix"]
    if not name.startswith(prefix):
        raise ValueError(f"{name!r} does not start with the deployment's prefix {prefix!r}")
    return name.removeprefix(prefix)


def _unknown(logical_id: str, properties: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = sorted(set(properties) - set(known))
    if unknown:
        raise ValueError(f"{logical_id}: {', '.join(unknown)} not carried over to moto (tests/aws/deployed.py)")


# -- tables --------------------------------------------------------------------------------------

@functools.cache
def table_definitions() -> tuple[TableDefinition, ...]:
    out = []
    for logical_id, properties in _resources("AWS::DynamoDB::Table"):
        _unknown(logical_id, properties, _TABLE_ARGUMENTS + _TABLE_IGNORED)
        ttl = properties.get("TimeToLiveSpecification") or {}
        out.append(TableDefinition(
            role=_role(properties["TableName"]),
            arguments={key: properties[key] for key in _TABLE_ARGUMENTS if key in properties},
            ttl=ttl.get("AttributeName") if ttl.get("Enabled") else None))
    return tuple(out)


def create_tables(client: Any, names: TableNames) -> None:
    """The deployment's tables, named by `names` (moto answers ACTIVE at once: no waiter)."""
    for table in table_definitions():
        name = getattr(names, table.role)
        client.create_table(TableName=name, **table.arguments)
        if table.ttl:
            client.update_time_to_live(TableName=name,
                                       TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl})


# -- queues --------------------------------------------------------------------------------------

@functools.cache
def queue_definitions() -> tuple[QueueDefinition, ...]:
    out = []
    for logical_id, properties in _resources("AWS::SQS::Queue"):
        _unknown(logical_id, properties, _QUEUE_ATTRIBUTES + _QUEUE_IGNORED)
        redrive = properties.get("RedrivePolicy")
        out.append(QueueDefinition(
            logical_id=logical_id, role=_role(properties["QueueName"]),
            attributes={key: _string(properties[key]) for key in _QUEUE_ATTRIBUTES if key in properties},
            dead_letter=redrive["deadLetterTargetArn"]["Fn::GetAtt"][0] if redrive else None,
            max_receive_count=int(redrive["maxReceiveCount"]) if redrive else None))
    return tuple(out)


def _string(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def create_queues(client: Any, prefix: str = "gqa-", fifo: bool = False) -> QueueUrls:
    """The deployment's queues and their dead-letter queues, named
    <prefix><role>. Dead-letter queues first: a redrive names its target's ARN.

    fifo=True: the deployments use standard queues only, but the intake
    adapter supports FIFO ones (SqsIntake tells them by their `.fifo` URL). The
    template's queue is then made FIFO where the adapter's definition allows it
    (Queue.is_fifo), its dead-letter queue with it, as SQS requires."""
    definitions = queue_definitions()
    served = {q.dead_letter: q for q in definitions if q.dead_letter}
    adapter = {q.logical: q for q in QUEUES}
    arns: dict[str, str] = {}
    urls: dict[str, str] = {}
    for queue in sorted(definitions, key=lambda q: q.dead_letter is not None):
        main = served.get(queue.logical_id, queue)   # a dead-letter queue follows the queue it serves
        as_fifo = fifo and adapter[main.role].is_fifo(fifo)
        attributes = dict(queue.attributes)
        if as_fifo:
            attributes["FifoQueue"] = "true"
            if queue is main:    # the sender passes a deduplication id (the idempotency key)
                attributes["ContentBasedDeduplication"] = "false"
        if queue.dead_letter:
            attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": arns[queue.dead_letter],
                                                      "maxReceiveCount": queue.max_receive_count})
        url = client.create_queue(QueueName=f"{prefix}{queue.role}" + (".fifo" if as_fifo else ""),
                                  Attributes=attributes)["QueueUrl"]
        arns[queue.logical_id] = client.get_queue_attributes(
            QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        urls[queue.role] = url
    by_id = {q.logical_id: q for q in definitions}
    return QueueUrls(intake={tier: urls[q.logical] for tier, q in INTAKE.items()}, wakeup=urls[WAKEUP.logical],
                     dead_letters={q.role: urls[by_id[q.dead_letter].role] for q in definitions if q.dead_letter},
                     trigger_timer=urls[TRIGGER_TIMER.logical])


@contextmanager
def moto_tables(names: TableNames) -> Iterator[None]:
    """moto, with the deployed tables under `names`, for the length of a test."""
    from unittest import mock

    from moto import mock_aws

    from tests.aws.moto_support import session
    from tests.contract.conftest import FAKE_AWS

    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), names)
        yield
