"""The largest deployment the file allows still deploys: each stack under
CloudFormation's 500 resources and its template under the 1 MB CloudFormation
takes from S3 (cdk deploy uploads it there)."""

from __future__ import annotations

import json

import pytest

from gqa.models.deployment_shapes import MAX_BUCKETS, MAX_IMAGES, MAX_POOLS, MAX_TEAMS
from infra import build_app
from tests.infra.support import _CONTEXT, example_values

MAX_RESOURCES = 500
MAX_TEMPLATE_BYTES = 1024 * 1024
INSTANCES = {"a10g": "g5.xlarge", "l4": "g6.xlarge", "l40s": "g6e.xlarge", "h100": "p5.48xlarge"}


def largest() -> dict:
    values = example_values()
    values["pools"] = [{"gpu_type": gpu, "spot": spot, "instance_types": [instance], "max_gpus": 64, "price": 2.5}
                       for gpu, instance in INSTANCES.items() for spot in (True, False)][:MAX_POOLS]
    values["teams"] = [{"name": f"team-{i:03d}", "share": 1, "max_gpus": 8, "budget": 1000,
                        "members": [f"user{i:03d}"]} for i in range(MAX_TEAMS)]
    values["images"]["named"] = {f"image-{i}": f"pytorch/pytorch:2.{i}" for i in range(MAX_IMAGES)}
    values["triggers"]["buckets"] = [f"training-data-{i:02d}" for i in range(MAX_BUCKETS)]
    values["alerts"]["emails"] = [f"ops{i}@example.com" for i in range(5)]
    return values


@pytest.mark.slow
def test_the_largest_deployment_fits_cloudformations_limits():
    values = largest()
    assert len(values["pools"]) == MAX_POOLS
    assembly = build_app({**_CONTEXT, "gqa:config": values}).synth()   # cdk-nag and validation included
    for stack in assembly.stacks:
        resources = stack.template["Resources"]
        assert len(resources) < MAX_RESOURCES, (stack.stack_name, len(resources))
        assert len(json.dumps(stack.template)) < MAX_TEMPLATE_BYTES, stack.stack_name
