"""The largest deployment the file allows still deploys: each stack under
CloudFormation's 500 resources and its template, as `cdk deploy` uploads it
(the indented file in the cloud assembly), under the 1,000,000 bytes
CloudFormation takes from S3; the settings items under DynamoDB's 400 KB; and
each function's environment under Lambda's 4 KB as Lambda measures it."""

from __future__ import annotations

import json
import os
import re

import pytest

from gqa.models.deployment import LAMBDA_ENVIRONMENT_BYTES, environment_bytes, validate_deployment
from gqa.models.deployment_shapes import (MAX_ALL_MEMBERS, MAX_BUCKETS, MAX_EMAILS, MAX_GPUS, MAX_IMAGES,
                                          MAX_MEMBER_CHARS, MAX_MEMBERS, MAX_POOLS, MAX_TEAMS)
from gqa.models.errors import SpecError
from gqa.settings_codec import LISTED_GPUS
from infra import build_app
from infra.registration import settings_updates
from tests.infra.support import _CONTEXT, example_values, resolved_environment

MAX_RESOURCES = 500
MAX_TEMPLATE_BYTES = 1_000_000          # "Template may not exceed 1000000 bytes in size"
MAX_ITEM_BYTES = 400 * 1024
INSTANCES = {"a10g": "g5.48xlarge", "l4": "g6.48xlarge", "l40s": "g6e.48xlarge", "h100": "p5.48xlarge"}


def ceilings(gpus: int = MAX_GPUS) -> dict:
    """Every ceiling at once, every name at its longest; `gpus` in all."""
    values = example_values()
    values["name"] = "production-east1"                               # 16 characters
    values["pools"] = [{"gpu_type": (gpu + "-" + "g" * 16)[:16], "spot": spot, "instance_types": [instance],
                        "max_gpus": gpus // MAX_POOLS, "price": 123.456789}
                       for gpu, instance in INSTANCES.items() for spot in (True, False)][:MAX_POOLS]
    members = iter(range(MAX_ALL_MEMBERS))
    values["teams"] = [{"name": (f"team-{i:03d}-" + "t" * 63)[:63], "share": 1.5, "max_gpus": 8,
                        "max_gpus_per_user": 4, "budget": 123456.78, "stop_at_budget": True,
                        "members": [(f"arn:aws:sts::123456789012:assumed-role/Research-{j:03d}-" + "r" * 128)
                                    [:MAX_MEMBER_CHARS - 2] + "/*" for _, j in zip(range(MAX_MEMBERS), members)]}
                       for i in range(MAX_TEAMS)]
    values["images"]["named"] = {f"image-{i}-devel": f"123456789012.dkr.ecr.us-east-1.amazonaws.com/train-{i}:v1"
                                 for i in range(MAX_IMAGES)}
    values["triggers"]["buckets"] = [f"training-data-bucket-{i:02d}" for i in range(MAX_BUCKETS)]
    values["alerts"] = {"emails": [f"ops-{i:03d}-" + "e" * 60 + "@example-company.com" for i in range(MAX_EMAILS - 1)],
                        "approval_emails": ["gpu-approvers@example.com"]}
    return values


def largest(gpus: int = MAX_GPUS) -> dict:
    """The ceilings, with admin patterns filling the functions' environment to the last byte
    the file check accepts."""
    values = ceilings(gpus)
    admins = ["arn:aws:iam::123456789012:user/admin-000"]
    while _accepted(values, [*admins, f"arn:aws:iam::123456789012:user/admin-{len(admins):03d}"]):
        admins.append(f"arn:aws:iam::123456789012:user/admin-{len(admins):03d}")
    while _accepted(values, [*admins[:-1], admins[-1] + "x"]):
        admins[-1] += "x"
    values["access"]["admins"] = admins
    return values


def _accepted(values: dict, admins: list[str]) -> bool:
    try:
        validate_deployment({**values, "access": {**values["access"], "admins": admins}})
    except SpecError:
        return False
    return True


# the most GPUs, and the most the settings also list GPU by GPU (settings_codec.LISTED_GPUS): the
# template's largest inventory
GPU_TOTALS = [MAX_GPUS, LISTED_GPUS]


@pytest.fixture(scope="module", params=GPU_TOTALS, ids=lambda gpus: f"{gpus}-gpus")
def assembly(tmp_path_factory, request):
    return request.param, build_app({**_CONTEXT, "gqa:config": largest(request.param)},
                                    outdir=str(tmp_path_factory.mktemp("cdk.out"))).synth()   # cdk-nag included


@pytest.mark.slow
def test_the_largest_deployment_fits_cloudformations_limits(assembly):
    gpus, assembly = assembly
    values = largest(gpus)
    assert len(values["pools"]) == MAX_POOLS and sum(p["max_gpus"] for p in values["pools"]) == gpus
    assert sum(len(t["members"]) for t in values["teams"]) == MAX_ALL_MEMBERS
    for stack in assembly.stacks:
        resources = stack.template["Resources"]
        assert len(resources) < MAX_RESOURCES, (stack.stack_name, len(resources))
        # what cdk deploy uploads: the file as written, indented
        assert os.path.getsize(stack.template_full_path) < MAX_TEMPLATE_BYTES, stack.stack_name


@pytest.mark.parametrize("gpus", GPU_TOTALS)
def test_the_largest_deployments_settings_items_fit_dynamodb(gpus):
    for name, update in settings_updates(validate_deployment(largest(gpus))).items():
        size = len(json.dumps(update["ExpressionAttributeValues"]))
        assert size < MAX_ITEM_BYTES, (name, size)


@pytest.mark.slow
def test_every_function_environment_at_the_edge_fits_lambdas_4_kb(assembly):
    _, assembly = assembly
    templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    measured = {}
    for name, template in templates.items():
        for resource in template["Resources"].values():
            variables = resource["Properties"].get("Environment", {}).get("Variables", {}) \
                if resource["Type"] == "AWS::Lambda::Function" else {}
            if "GQA_JOBS_TABLE" in variables:
                measured[resource["Properties"]["FunctionName"]] = environment_bytes(
                    resolved_environment(templates, name, variables))
    assert len(measured) == 6 and max(measured.values()) <= LAMBDA_ENVIRONMENT_BYTES, measured


def test_one_byte_past_the_edge_is_refused_with_the_numbers():
    values = largest()
    values["access"]["admins"][-1] += "x"
    with pytest.raises(SpecError, match=re.escape("the functions' settings from this file take ")
                       + r"[\d,]+ bytes as Lambda counts them \(GQA_[A-Z_]+ [\d,]+, .*Lambda allows 4,096"):
        validate_deployment(values)
