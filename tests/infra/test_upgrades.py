"""Changing the deployment's configuration (a pool, a team, an alert address,
an image, a capacity wait) never replaces a table, bucket, queue, log group
or key: every stateful resource of the example keeps its logical id, and each
property whose change CloudFormation applies by replacing the resource keeps
its value. A replaced table or bucket is a new, empty one."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from tests.infra.support import ROOT, example_values

pytestmark = pytest.mark.slow

# Per type, the properties the CloudFormation resource reference marks
# "Update requires: Replacement" (KMS keys are never replaced, but a change to
# these four makes the update fail, which is as bad for an upgrade).
REPLACED_BY = {
    "AWS::DynamoDB::Table": ("TableName", "KeySchema", "LocalSecondaryIndexes", "ImportSourceSpecification",
                             "AttributeDefinitions"),   # only when an existing definition changes: see same()
    "AWS::S3::Bucket": ("BucketName", "ObjectLockEnabled"),
    "AWS::SQS::Queue": ("QueueName", "FifoQueue"),
    "AWS::Logs::LogGroup": ("LogGroupName", "LogGroupClass"),
    "AWS::KMS::Key": ("KeySpec", "KeyUsage", "Origin", "MultiRegion"),
}


def _with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    values = example_values()
    change(values)
    return values


VARIANTS = {
    "a pool added": lambda v: v["pools"].append({"gpu_type": "l4", "spot": True, "instance_types": ["g6.xlarge"],
                                                 "instance_gpus": 1, "max_gpus": 4, "price": 0.3}),
    "a team added": lambda v: v["teams"].append({"name": "speech", "share": 1, "max_gpus": 4, "members": ["dave"]}),
    "an alert address added": lambda v: v["alerts"]["emails"].append("oncall@example.com"),
    "the default image changed": lambda v: v["images"].update(default="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"),
    "the capacity wait changed": lambda v: v["compute"].update(capacity_wait="8h"),
}


def stateful(values: dict[str, Any]) -> dict[str, dict[str, tuple[str, dict[str, Any]]]]:
    """{stack name: {logical id: (type, properties)}} of the stateful resources
    of every stack the app builds for these values."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from infra import build_app

    # cdk.json's context (as `cdk synth` gives it), with these values for the deployment file
    context = {k: v for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items()
               if not k.startswith("gqa:")}
    app = build_app({**context, "gqa:config": values})
    stacks = [s for s in app.node.children if isinstance(s, cdk.Stack)]
    assert len(stacks) == 2
    out = {}
    for stack in stacks:
        resources = Template.from_stack(stack).to_json()["Resources"]
        out[stack.stack_name] = {logical_id: (r["Type"], r.get("Properties", {}))
                                 for logical_id, r in resources.items() if r["Type"] in REPLACED_BY}
    return out


def same(kind: str, name: str, before: Any, after: Any) -> bool:
    if (kind, name) == ("AWS::DynamoDB::Table", "AttributeDefinitions"):   # adding one is an in-place update
        types = {d["AttributeName"]: d["AttributeType"] for d in after or []}
        return all(types.get(d["AttributeName"]) == d["AttributeType"] for d in before or [])
    return before == after


@pytest.fixture(scope="module")
def example() -> dict[str, dict[str, tuple[str, dict[str, Any]]]]:
    return stateful(example_values())


def test_the_example_has_stateful_resources_to_keep(example):
    kinds = {kind for resources in example.values() for kind, _ in resources.values()}
    assert {"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::SQS::Queue"} <= kinds


@pytest.mark.parametrize("change", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_configuration_change_replaces_no_stateful_resource(example, change):
    changed = stateful(_with(change))

    replaced = []
    for stack, resources in example.items():
        for logical_id, (kind, before) in resources.items():
            if logical_id not in changed.get(stack, {}):
                replaced.append(f"{stack}/{logical_id} ({kind}) is gone")
                continue
            after = changed[stack][logical_id][1]
            replaced += [f"{stack}/{logical_id}.{name}: {before.get(name)!r} -> {after.get(name)!r}"
                         for name in REPLACED_BY[kind] if not same(kind, name, before.get(name), after.get(name))]
    assert replaced == []
