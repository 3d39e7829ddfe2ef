"""The whole app as `cdk synth` builds it from a deployment file: two stacks
that reference one way, no lookups, dev and prod differing only by
configuration, one source of truth for the functions' settings, and a bad
file refused with the field named."""

from __future__ import annotations

import json

import pytest

from gqa.models.errors import SpecError
from infra import build_app
from infra.stacks import stack_names
from tests.infra.support import _CONTEXT, deployment, example_values


def _app(**changes):
    return build_app({**_CONTEXT, "gqa:config": {**example_values(), **changes}})


@pytest.fixture(scope="module")
def dev():
    app = _app()
    return app, app.synth()


@pytest.fixture(scope="module")
def prod():
    app = _app(name="prod", retain_data=True)
    return app, app.synth()


def _template(assembly, name):
    return assembly.get_stack_by_name(name).template


def test_two_stacks_the_service_one_reading_the_data_one(dev):
    app, assembly = dev
    data_name, service_name = stack_names(deployment())
    stacks = {s.stack_name: s for s in assembly.stacks}
    assert set(stacks) == {data_name, service_name}
    service = next(c for c in app.node.children if getattr(c, "stack_name", None) == service_name)
    data = next(c for c in app.node.children if getattr(c, "stack_name", None) == data_name)
    assert [d.stack_name for d in service.dependencies] == [data_name]
    assert data.dependencies == []


def test_no_lookup_needs_credentials(dev):
    _, assembly = dev
    manifest = json.loads((__import__("pathlib").Path(assembly.directory) / "manifest.json").read_text())
    assert not manifest.get("missing"), manifest.get("missing")


def test_the_functions_settings_come_from_the_file(dev):
    _, assembly = dev
    config = deployment()
    template = _template(assembly, stack_names(config)[1])
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
                 and "GQA_JOBS_TABLE" in r["Properties"].get("Environment", {}).get("Variables", {})]
    assert len(functions) == 6
    for settings_name, value in config.function_settings().items():
        seen = [f["Properties"]["Environment"]["Variables"].get(settings_name) for f in functions]
        assert value in seen, settings_name
        assert set(seen) <= {value, None}


def test_no_policy_allows_every_action_of_a_service(dev):
    _, assembly = dev
    for stack in assembly.stacks:
        for logical, resource in stack.template["Resources"].items():
            document = resource.get("Properties", {}).get("PolicyDocument")
            for statement in (document or {}).get("Statement", []):
                if statement["Effect"] != "Allow":   # the TLS-only policies deny every action over plain HTTP
                    continue
                actions = statement.get("Action")
                actions = actions if isinstance(actions, list) else [actions]
                assert "*" not in actions and not any(a.endswith(":*") for a in actions if a), logical


@pytest.mark.parametrize("fixture, kept", [("dev", False), ("prod", True)])
def test_prod_keeps_its_data_dev_deletes_it(request, fixture, kept):
    app, assembly = request.getfixturevalue(fixture)
    name = "prod" if kept else "dev"
    data = _template(assembly, f"gqa-{name}-data")
    for resource in data["Resources"].values():
        if resource["Type"] in ("AWS::DynamoDB::Table", "AWS::S3::Bucket"):
            assert resource["DeletionPolicy"] == ("Retain" if kept else "Delete")
        if resource["Type"] == "AWS::DynamoDB::Table":
            assert resource["Properties"].get("DeletionProtectionEnabled", False) is kept
    stack = next(c for c in app.node.children if getattr(c, "stack_name", None) == f"gqa-{name}-data")
    assert stack.termination_protection is kept


def test_a_bad_file_is_refused_with_the_field():
    values = example_values()
    values["pools"][1]["max_gpus"] = 0
    with pytest.raises(SpecError, match=r"pools\[1\]\.max_gpus: must be greater than 0"):
        build_app({**_CONTEXT, "gqa:config": values})


def test_the_stacks_own_settings_fit_the_room_the_file_leaves_them():
    """Deployment refuses a file whose settings would leave the stack less than
    STACK_SETTINGS_BYTES of Lambda's 4 KB: each function's other variables fit in it
    as Lambda measures them (JSON), a URL or ARN resolved at its longest (a
    16-character deployment name in the longest region name)."""
    from gqa.models.deployment import STACK_SETTINGS_BYTES, environment_bytes

    from tests.infra.support import resolved_environment

    config = deployment(name="abcdefghijklmnop")
    assembly = _app(name=config.name).synth()
    templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    service = stack_names(config)[1]
    for resource in templates[service]["Resources"].values():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {}) \
            if resource["Type"] == "AWS::Lambda::Function" else {}
        if "GQA_JOBS_TABLE" not in variables:
            continue
        own = {k: v for k, v in variables.items() if k not in config.function_settings()}
        size = environment_bytes(resolved_environment(templates, service, own))
        assert size <= STACK_SETTINGS_BYTES, (resource["Properties"]["FunctionName"], size)
