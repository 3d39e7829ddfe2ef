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


def stateful(values: dict[str, Any], **extra: Any) -> dict[str, dict[str, tuple[str, dict[str, Any]]]]:
    """{stack name: {logical id: (type, properties)}} of the stateful resources
    of every stack the app builds for these values (and `extra` context)."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from infra import build_app

    # cdk.json's context (as `cdk synth` gives it), with these values for the deployment file
    context = {k: v for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items()
               if not k.startswith("gqa:")}
    app = build_app({**context, **extra, "gqa:config": values})
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


_synths: dict[str | None, dict[str, dict[str, tuple[str, dict[str, Any]]]]] = {}


def example_through(through: str | None) -> dict[str, dict[str, tuple[str, dict[str, Any]]]]:
    """The example's stateful resources, built with `-c gqa:indexes-through` or without (once each)."""
    if through not in _synths:
        _synths[through] = stateful(example_values(), **({} if through is None else {"gqa:indexes-through": through}))
    return _synths[through]


@pytest.fixture(scope="module")
def example() -> dict[str, dict[str, tuple[str, dict[str, Any]]]]:
    return example_through(None)


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


# The jobs table's indexes as earlier versions deployed them, oldest first (each version's table
# definitions); an upgrade from any of them must change one index a deploy, or CloudFormation fails it.
DEPLOYED = {
    "live": ("by_state", "by_team", "live"),
    "changes": ("by_state", "by_team", "live", "changes"),
    "pass": ("by_state", "by_team", "live", "changes", "pass"),
}


def jobs_indexes(through: str | None) -> dict[str, Any]:
    """{index name: its definition} of the jobs table the app builds, `-c gqa:indexes-through` given or not."""
    tables = [props for stack in example_through(through).values() for kind, props in stack.values()
              if kind == "AWS::DynamoDB::Table" and props.get("TableName", "").endswith("jobs")]
    assert len(tables) == 1
    return {i["IndexName"]: i for i in tables[0].get("GlobalSecondaryIndexes", [])}


@pytest.mark.parametrize("since", DEPLOYED)
def test_an_earlier_deployment_upgrades_one_index_a_deploy(since):
    from gqa.adapters.aws.tables import JOBS

    every = [i.name for i in JOBS.indexes]
    deployed = DEPLOYED[since]
    assert every[:len(deployed)] == list(deployed)   # versions only added indexes since; the steps rely on it
    # the README's steps: one deploy through each missing index in order, the last one a plain deploy
    steps = [*every[len(deployed):-1], None]
    now: dict[str, Any] | None = None
    names = set(deployed)
    for step in steps:
        built = jobs_indexes(step)
        assert len(set(built) ^ names) == 1, f"through {step}: {sorted(names)} -> {sorted(built)}"
        if now is not None:   # an index kept is kept as it was: a projection cannot change in place
            assert all(built[n] == now[n] for n in names)
        now, names = built, set(built)
    assert sorted(names) == sorted(every)


def test_the_step_builds_the_indexes_up_to_the_one_it_names():
    assert list(jobs_indexes("pass")) == ["by_state", "by_team", "live", "changes", "pass"]
    assert list(jobs_indexes(None))[-1] == "ended"


def test_an_unknown_index_is_refused_naming_the_indexes():
    from gqa.models.errors import SpecError
    from infra import build_app

    with pytest.raises(SpecError, match=r"indexes \(by_state, .*ended\), not 'past'"):
        build_app({"gqa:config": example_values(), "gqa:indexes-through": "past"})
