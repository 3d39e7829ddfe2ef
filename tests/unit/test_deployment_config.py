"""One deployment configuration (gqa/models/deployment.py): the example loads,
every bad value is refused in one line naming its field, cdk.json's context
gives it inline or as a file, and what the functions read is derived from it."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from gqa.adapters.aws.resources import Pool, pools_from_json
from gqa.models.deployment import (DEFAULT_IMAGE, Deployment, deployment_from_context, load_deployment,
                                   validate_deployment)
from gqa.models.errors import SpecError
from gqa.models.trigger import TriggerBucket
from gqa.scheduling.snapshot import TeamPolicy
from gqa.services.deployment import queue_policy, team_policies
from gqa.services.access import AccessPolicy, Role
from lambdas import environment

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "deployment.yaml"


@pytest.fixture
def raw() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def _refused(raw: dict) -> str:
    with pytest.raises(SpecError) as info:
        validate_deployment(raw, source="deployment.yaml")
    return str(info.value)


# -- the example ---------------------------------------------------------------------------------
def test_the_example_loads_with_every_section():
    config = load_deployment(EXAMPLE)
    assert (config.name, config.retain_data) == ("dev", False)
    assert [(p.pool_name, p.spot, p.max_gpus) for p in config.pools] == [("a10g-spot", True, 16),
                                                                        ("a10g-ondemand", False, 8)]
    assert [t.name for t in config.teams] == ["nlp", "vision"]
    assert config.access.admins and config.access.approvers
    assert config.alerts.emails == ["ml-platform@example.com"]
    assert config.triggers.buckets == ["example-training-data"]
    assert config.images.default == DEFAULT_IMAGE
    assert config.network.create is not None and config.network.existing is None


def test_cdk_json_points_at_the_example_and_keeps_its_other_settings():
    cdk = json.loads((ROOT / "cdk.json").read_text())
    assert cdk["app"] == "python3 app.py" and cdk["context"]["cli-telemetry"] is False
    assert cdk["context"]["gqa:config-file"] == "examples/deployment.yaml"
    assert deployment_from_context(cdk["context"], base_dir=ROOT) == load_deployment(EXAMPLE)


# -- bad values: one line each, naming the field ----------------------------------------------------
def _set(path: str, value):
    """A change to the example: `pools.1.max_gpus` set to value (DELETE removes it)."""
    def change(raw: dict) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node = raw
        for part in parents:
            node = node[part]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return change


class _Delete:
    """The value that removes a field; named in test ids, which must read the same in every
    process (the run's workers each collect the tests, and their ids must agree)."""

    def __repr__(self) -> str:
        return "DELETE"


DELETE = _Delete()
EXISTING = {"vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0"]}

BAD = [
    ("name", "Dev", "name: must be a short lowercase name such as dev or prod (a-z, 0-9, '-'; at most 16 "
                    "characters), got 'Dev'"),
    ("name", "development-environment", "name: must be a short lowercase name such as dev or prod (a-z, 0-9, '-'; "
                                        "at most 16 characters), got 'development-environment'"),
    ("retain_data", DELETE, "retain_data: is required"),
    ("retain_data", "no", "retain_data: must be true or false, got 'no'"),
    ("pools", [], "pools: must not be empty"),
    ("pools", DELETE, "pools: is required"),
    ("pools.1.max_gpus", 0, "pools[1].max_gpus: must be greater than 0"),
    ("pools.1.max_gpus", "4", "pools[1].max_gpus: must be a whole number, got '4'"),
    ("pools.1.max_gpus", True, "pools[1].max_gpus: must be a whole number, got True"),
    ("pools.1.max_gpus", 2.5, "pools[1].max_gpus: must be a whole number, got 2.5"),
    ("pools.1.price", -0.1, "pools[1].price: must be greater than or equal to 0"),
    ("pools.1.spot", "yes", "pools[1].spot: must be true or false, got 'yes'"),
    ("pools.1.spot", True, "pools[1]: pools[0] is already a10g spot; raise its max_gpus instead"),
    ("pools.1.gpu_type", "a10g,l4", "pools[1].gpu_type: must be a GPU type such as a10g (letters, digits, '-', "
                                    "'_'), got 'a10g,l4'"),
    ("pools.1.name", "a10g-spot", "pools[1].name: pool name 'a10g-spot' is taken by pools[0]"),
    ("pools.1.name", "a10g.od", "pools[1].name: must be a pool name (letters, digits, '-', '_'), got 'a10g.od'"),
    ("pools.1.instance_types", [], "pools[1].instance_types: must not be empty"),
    ("pools.1.instance_types", ["g5"], "pools[1].instance_types[0]: must be an EC2 instance type such as "
                                       "g5.xlarge, got 'g5'"),
    ("pools.1.instance_types", ["g5.xlarge", "g5.xlarge"], "pools[1].instance_types[1]: instance type "
                                                           "'g5.xlarge' is given twice"),
    ("pools.1.instance_gpus", 0, "pools[1].instance_gpus: must be greater than 0"),
    ("pools.1.max_gpu", 3, "unknown field 'pools[1].max_gpu'; did you mean 'max_gpus'?"),
    ("pools.1.gpu_type", DELETE, "pools[1].gpu_type: is required"),
    ("teams", {"nlp": {}}, "teams: must be a list, got a mapping"),
    ("teams.1.name", "nlp", "teams[1].name: team 'nlp' is already teams[0]"),
    ("teams.1.name", "ml team", "teams[1].name: must be a team name (letters, digits, '.', '-', '_'), got 'ml team'"),
    ("teams.1.share", 0, "teams[1].share: must be greater than 0"),
    ("teams.1.budget", -5, "teams[1].budget: must be greater than or equal to 0"),
    ("teams.1.budget", float("inf"), "teams[1].budget: must be a finite number"),
    ("teams.1.share", float("nan"), "teams[1].share: must be a finite number"),
    ("pools.1.price", float("inf"), "pools[1].price: must be a finite number"),
    ("teams.1.budget", DELETE, "teams[1].stop_at_budget: needs a budget to stop at"),
    ("teams.0.max_gpus_per_user", 20, "teams[0].max_gpus_per_user: is 20, more than the team's max_gpus (16)"),
    ("teams.1.members", ["bob"], "teams[1].members[0]: 'bob' is already a member of team nlp"),
    ("teams.1.members", ["arn:aws:s3:::data"], "teams[1].members[0]: must be an IAM ARN pattern such as "
                                               "arn:aws:iam::123456789012:user/alice or a user name, got "
                                               "'arn:aws:s3:::data'"),
    ("access.admins", ["arn:aws:iam::12:user/x"], "access.admins[0]: must be an IAM ARN pattern such as "
                                                  "arn:aws:iam::123456789012:user/alice or a user name, got "
                                                  "'arn:aws:iam::12:user/x'"),
    ("access.approvers", ["carol", "carol"], "access.approvers[1]: pattern 'carol' is given twice"),
    ("access.identity_roles", ["SSO role"], "access.identity_roles[0]: must be an IAM role name pattern such as "
                                            "AWSReservedSSO_*, got 'SSO role'"),
    ("access.owners", [], "unknown field 'access.owners'; did you mean 'approvers'?"),
    ("queue.max_wall_time", "3 fortnights", "queue.max_wall_time: invalid duration '3 fortnights': unknown unit "
                                            "'fortnights'; use s, m, h, d or w"),
    ("queue.half_life", 0, "queue.half_life: duration must be positive, got 0"),
    ("queue.max_gpus_per_job", 0, "queue.max_gpus_per_job: must be greater than 0"),
    ("approval.cost", 0, "approval.cost: must be greater than 0"),
    ("approval.gpus", "8", "approval.gpus: must be a whole number, got '8'"),
    ("alerts.emails", ["ops@"], "alerts.emails[0]: must be an e-mail address such as ops@example.com, got 'ops@'"),
    ("alerts.emails", ["ops example.com"], "alerts.emails[0]: must be an e-mail address such as ops@example.com, "
                                           "got 'ops example.com'"),
    ("triggers.buckets", ["My_Bucket"], "triggers.buckets[0]: 'My_Bucket' is not a valid S3 bucket name: use "
                                        "lowercase letters, digits, '.' and '-', starting and ending with a letter "
                                        "or digit"),
    ("triggers.buckets", ["ab"], "triggers.buckets[0]: 'ab' is not a valid S3 bucket name: it must be 3 to 63 "
                                 "characters long"),
    ("triggers.buckets", ["data..raw"], "triggers.buckets[0]: 'data..raw' is not a valid S3 bucket name: it may "
                                        "not hold two adjacent periods"),
    ("triggers.buckets", ["192.168.1.1"], "triggers.buckets[0]: '192.168.1.1' is not a valid S3 bucket name: it "
                                          "may not be an IP address"),
    ("triggers.buckets", ["data-s3alias"], "triggers.buckets[0]: 'data-s3alias' is not a valid S3 bucket name: "
                                           "that prefix or suffix is reserved by S3"),
    ("images.default", "Not An Image", "images.default: must be a container image such as "
                                       "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime, got 'Not An Image'"),
    ("images.named", {"x y": "a/b"}, "images.named.x y: image name 'x y' must be letters, digits, '.', '-', '_'"),
    ("images.named", {"train": "Registry/Train"}, "images.named.train: must be a container image URI such as "
                                                  "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1, got "
                                                  "'Registry/Train'"),
    ("images.named", {"a.b": "a/b", "a_b": "a/c"}, "images.named.a_b: images 'a.b' and 'a_b' would share a job "
                                                   "definition name"),
    ("network", {}, "network: give one of create: {} (a new VPC) or existing: {vpc_id, subnet_ids}"),
    ("network", {"create": {}, "existing": EXISTING}, "network: give one of create: {} (a new VPC) or existing: "
                                                      "{vpc_id, subnet_ids}"),
    ("network", "create", "network: must be a mapping, got 'create'"),
    ("network.create", {"cidr": "10.0.0.0/16"}, "unknown field 'network.create.cidr'"),
    ("network", {"existing": {**EXISTING, "vpc_id": "vpc-123"}},
     "network.existing.vpc_id: must be a VPC id such as vpc-0123456789abcdef0, got 'vpc-123'"),
    ("network", {"existing": {**EXISTING, "subnet_ids": []}}, "network.existing.subnet_ids: must not be empty"),
    ("network", {"existing": {**EXISTING, "subnet_ids": ["sub-1"]}},
     "network.existing.subnet_ids[0]: must be a subnet id such as subnet-0123456789abcdef0, got 'sub-1'"),
    ("network", {"existing": {"vpc_id": "vpc-0123456789abcdef0"}}, "network.existing.subnet_ids: is required"),
]


@pytest.mark.parametrize("path, value, message", BAD, ids=[f"{p}={v!r}"[:60] for p, v, _ in BAD])
def test_a_bad_value_is_refused_in_one_line_naming_its_field(raw, path, value, message):
    _set(path, value)(raw)
    assert _refused(raw) == f"deployment.yaml: {message}"


@pytest.mark.parametrize("path, value", [
    ("pools.1.price", 1),                    # a whole number is a price
    ("teams.1.share", 3),
    ("pools.1.instance_gpus", DELETE),
    ("network", {"existing": EXISTING}),
    ("network", {"existing": {"vpc_id": "vpc-12345678", "subnet_ids": ["subnet-12345678", "subnet-87654321"]}}),
    ("network", DELETE),                     # default: a new VPC
    ("images.named", {"ngc": "nvcr.io/nvidia/pytorch:24.08-py3",
                      "ecr": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train@sha256:" + "a" * 64}),
    ("access.admins", ["arn:aws:iam::*:role/Admin", "platform-*"]),
    ("teams", []),
])
def test_good_variations_are_accepted(raw, path, value):
    _set(path, value)(raw)
    assert isinstance(validate_deployment(raw), Deployment)


def test_a_value_in_a_file_is_refused_with_its_line(tmp_path):
    text = EXAMPLE.read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("max_gpus: 8"))   # pools[1]
    lines[at] = lines[at].replace("max_gpus: 8", "max_gpus: 0")
    bad = tmp_path / "deployment.yaml"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError) as info:
        load_deployment(bad)
    assert str(info.value) == f"{bad}:{at + 1}: pools[1].max_gpus: must be greater than 0"


@pytest.mark.parametrize("text, message", [
    ("- a\n- b\n", "deployment.yaml:1: a deployment must be a mapping (key: value lines)"),
    ("name: dev\nname: prod\n", "deployment.yaml:2: duplicate key 'name' (first at line 1)"),
    ("name: [dev\n", "deployment.yaml:2: malformed YAML: expected ',' or ']', but got '<stream end>'"),
])
def test_a_file_that_is_no_deployment_is_refused(tmp_path, monkeypatch, text, message):
    (tmp_path / "deployment.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as info:
        load_deployment("deployment.yaml")
    assert str(info.value) == message


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(SpecError, match="^no such file: nowhere.yaml$"):
        deployment_from_context({"gqa:config-file": "nowhere.yaml"}, base_dir=tmp_path)


# -- cdk.json context --------------------------------------------------------------------------------
def test_inline_and_file_context_give_the_same_deployment(raw):
    inline = deployment_from_context({"gqa:config": raw}, base_dir="/nonexistent")
    from_file = deployment_from_context({"gqa:config-file": "examples/deployment.yaml"}, base_dir=ROOT)
    as_string = deployment_from_context({"gqa:config": json.dumps(raw)}, base_dir="/nonexistent")  # cdk -c
    assert inline == from_file == as_string


@pytest.mark.parametrize("context, message", [
    ({}, "cdk.json context: set gqa:config-file (a deployment YAML file, e.g. examples/deployment.yaml) "
         "or gqa:config (its values)"),
    ({"gqa:config": {}, "gqa:config-file": "x.yaml"}, "cdk.json context: give gqa:config or gqa:config-file, "
                                                       "not both"),
    ({"gqa:config-file": ""}, "cdk.json context: gqa:config-file must name a YAML file"),
    ({"gqa:config": "{not json"}, "gqa:config: is not JSON"),
    ({"gqa:config": {"name": "dev", "retain_data": False, "pools": [{"gpu_type": "a10g"}]}},
     "gqa:config: pools[0].instance_types: is required"),
])
def test_bad_context_is_refused(context, message):
    with pytest.raises(SpecError) as info:
        deployment_from_context(context, base_dir=ROOT)
    assert str(info.value) == message


def test_dev_and_prod_differ_only_by_their_configuration(raw):
    dev = validate_deployment(raw)
    prod = validate_deployment({**copy.deepcopy(raw), "name": "prod", "retain_data": True})
    assert (dev.retain_data, prod.retain_data) == (False, True)
    assert (dev.prefix, prod.prefix) == ("gqa-dev-", "gqa-prod-")
    # every name follows from `name`, nothing else changes
    renamed = {k: v.replace("gqa-dev-", "gqa-prod-") for k, v in dev.function_settings().items()}
    assert renamed == prod.function_settings() != dev.function_settings()
    assert {k.replace("gqa-dev-", "gqa-prod-"): v for k, v in dev.job_definitions().items()} == prod.job_definitions()
    assert queue_policy(dev) == queue_policy(prod) and team_policies(dev) == team_policies(prod)


# -- what the rest of gqa reads -------------------------------------------------------------------------
def test_the_pools_round_trip_through_pools_from_json():
    config = load_deployment(EXAMPLE)
    pools = pools_from_json(config.pools_json())
    assert pools == (
        Pool(gpu_type="a10g", spot=True, max_gpus=16, price=0.45, job_queue="gqa-dev-a10g-spot",
             instance_types=("g5.xlarge", "g5.12xlarge"), instance_gpus=4),
        Pool(gpu_type="a10g", spot=False, max_gpus=8, price=1.21, job_queue="gqa-dev-a10g-ondemand",
             instance_types=("g5.xlarge", "g5.12xlarge"), instance_gpus=4),
    )


def test_a_named_pool_names_its_job_queue(raw):
    raw["pools"][0]["name"] = "cheap"
    (pool, _) = pools_from_json(validate_deployment(raw).pools_json())
    assert pool.queue_name == "gqa-dev-cheap"


def test_the_access_settings_round_trip_through_access_policy():
    config = load_deployment(EXAMPLE)
    policy = AccessPolicy.from_json(config.access_json())
    assert policy == AccessPolicy(admins=("arn:aws:iam::123456789012:user/platform-*",),
                                  approvers=("arn:aws:iam::123456789012:user/carol",),
                                  identity_roles=("AWSReservedSSO_*",))
    assert policy.principal("arn:aws:iam::123456789012:user/platform-dana").roles == {Role.ADMIN}
    sso = policy.principal("arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Dev_1a2b/erin")
    assert (sso.owner, sso.roles) == ("erin", frozenset())


def test_the_queue_policy_and_team_quotas_come_from_the_file():
    config = load_deployment(EXAMPLE)
    policy = queue_policy(config)
    assert (policy.max_gpus_per_job, policy.max_wall_time, policy.half_life) == (16, 3 * 86400.0, 7 * 86400.0)
    assert (policy.approval_gpus, policy.approval_gpu_hours, policy.approval_cost) == (8, 200.0, 250.0)
    assert policy.preempt_tiers == (2,)   # low
    assert team_policies(config) == {
        "nlp": TeamPolicy(share=2.0, max_gpus=16, max_gpus_per_user=8, budget=5000.0, stop_at_budget=False),
        "vision": TeamPolicy(share=1.0, max_gpus=8, max_gpus_per_user=None, budget=2000.0, stop_at_budget=True),
    }


def test_the_functions_read_back_what_the_file_says(monkeypatch):
    config = load_deployment(EXAMPLE)
    settings = config.function_settings()
    assert set(settings) == {"GQA_POOLS", "GQA_ACCESS", "GQA_IMAGES", "GQA_JOB_DEFINITION", "GQA_CHECKPOINT_GRACE",
                             "GQA_TRIGGER_BUCKETS", "GQA_KEEP_HISTORY_DAYS"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    assert environment.pools() == pools_from_json(config.pools_json())
    assert [p.queue_name for p in environment.pools()] == ["gqa-dev-a10g-spot", "gqa-dev-a10g-ondemand"]
    assert environment.access() == AccessPolicy.from_json(config.access_json())
    assert environment.access().approvers == ("arn:aws:iam::123456789012:user/carol",)
    assert environment.images() == {"pytorch-2.4-devel": "gqa-dev-image-pytorch-2_4-devel"}
    assert environment.job_definition() == "gqa-dev-default"
    assert environment.checkpoint_grace(10) == 90
    assert environment.keep_history() == 90 * 86400   # keep_history_days: a finished job's TTL
    assert environment.trigger_places().buckets == config.triggers.allowed() == \
        (TriggerBucket("example-training-data"),)
    # every job definition the functions may name is one the stack is told to create
    assert {environment.job_definition(), *environment.images().values()} == set(config.job_definitions())
    assert config.job_definitions()["gqa-dev-image-pytorch-2_4-devel"] == "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-devel"


@pytest.mark.parametrize("compute, message", [
    ({"checkpoint_grace": "5m"}, "compute.checkpoint_grace: must be at most 110s, got 5m"),
    ({"checkpoint_grace": "5s"}, "compute.checkpoint_grace: must be at least 10s, got 5s"),
    ({"capacity_wait": "5m"}, "compute.capacity_wait: must be at least 10m, got 5m"),
    ({"capacity_wait": "2d"}, "compute.capacity_wait: must be at most 24h, got 2d"),
    ({"capacity_wait": 5}, "compute.capacity_wait: must be at least 10m, got 5m"),   # a bare number is minutes
    ({"grace": "90s"}, "compute.grace"),
])
def test_compute_settings_within_what_aws_allows(compute, message):
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["compute"] = compute
    with pytest.raises(SpecError, match=re.escape(message)):
        validate_deployment(raw)


def test_instance_gpus_defaults_to_the_largest_type_and_may_not_exceed_it():
    raw = yaml.safe_load(EXAMPLE.read_text())
    del raw["pools"][0]["instance_gpus"]
    raw["pools"][0]["instance_types"] = ["g5.xlarge", "g5.48xlarge"]
    config = validate_deployment(raw)
    assert json.loads(config.pools_json())[0]["instance_gpus"] == 8
    raw["pools"][0]["instance_gpus"] = 16
    with pytest.raises(SpecError, match=r"pools\[0\]\.instance_gpus: is 16, but the pool's largest instance type "
                                        r"has 8 GPUs"):
        validate_deployment(raw)


def test_an_unknown_instance_type_is_refused_with_its_line(tmp_path):
    text = EXAMPLE.read_text().replace("instance_types: [g5.xlarge, g5.12xlarge]",
                                       "instance_types: [g5.xlarge, x9.huge]", 1)
    path = tmp_path / "deployment.yaml"
    path.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "x9.huge" in row)
    with pytest.raises(SpecError, match=rf"deployment.yaml:{line}: pools\[0\]\.instance_types\[1\]: 'x9.huge' "
                                        r"is not a GPU instance type gqa knows \(families g4dn, g5"):
        load_deployment(path)


@pytest.mark.parametrize("preemptible, message", [
    (["high"], "tiers.preemptible[0]: must be one of normal, low (a higher tier preempts it), got 'high'"),
    (["low", "urgent"], "tiers.preemptible[1]: must be one of normal, low"),
    (["low", "low"], "tiers.preemptible"),
])
def test_only_a_lower_tier_may_be_preemptible(preemptible, message):
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["tiers"] = {"preemptible": preemptible}
    with pytest.raises(SpecError, match=re.escape(message)):
        validate_deployment(raw)


def test_preemptible_tiers_reach_the_queue_policy():
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["tiers"] = {"preemptible": ["low", "normal"]}
    assert queue_policy(validate_deployment(raw)).preempt_tiers == (1, 2)
    raw["tiers"] = {}
    assert queue_policy(validate_deployment(raw)).preempt_tiers == ()


def test_time_sliced_tiers_and_their_slice_reach_the_queue_policy():
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["tiers"] = {"time_sliced": ["normal", "high"], "slice_after": "2h"}
    policy = queue_policy(validate_deployment(raw))
    assert (policy.slice_tiers, policy.slice_after) == ((0, 1), 7_200.0)
    raw["tiers"] = {}
    assert queue_policy(validate_deployment(raw)).slice_tiers == ()
    for tiers, slice_after, message in ((["urgent"], "1h", "tiers.time_sliced[0]: must be one of high, normal, low"),
                                        (["low"], "30s", "tiers.slice_after")):
        raw["tiers"] = {"time_sliced": tiers, "slice_after": slice_after}
        with pytest.raises(SpecError, match=re.escape(message)):
            validate_deployment(raw)


def test_settings_that_would_not_fit_a_functions_environment_are_refused():
    """Lambda refuses an environment over 4 KB at deploy time, after the stack is half made: the
    file is refused first, naming what takes the room."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["access"]["admins"] = [f"arn:aws:iam::123456789012:user/platform-admin-{i:03d}" for i in range(60)]
    with pytest.raises(SpecError, match=r"the functions' settings from this file take [\d,]+ bytes as Lambda "
                                        r"counts them \(GQA_ACCESS "
                                        r"[\d,]+, .*Lambda allows 4,096"):
        validate_deployment(raw)
    raw["access"]["admins"] = ["arn:aws:iam::123456789012:user/platform-admin-*"]
    assert validate_deployment(raw).access.admins == raw["access"]["admins"]


@pytest.mark.parametrize("path, value, message", [
    (("teams",), [{"name": f"t{i}", "share": 1} for i in range(101)], "teams: has 101 entries, at most 100"),
    (("images", "named"), {f"i{i}": "pytorch/pytorch:1" for i in range(11)},
     "images.named: has 11 entries, at most 10"),
    (("triggers", "buckets"), [f"data-{i:02d}" for i in range(11)], "triggers.buckets: has 11 entries, at most 10"),
])
def test_sizes_beyond_what_one_stack_holds_are_refused(path, value, message):
    raw = yaml.safe_load(EXAMPLE.read_text())
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(SpecError, match=re.escape(message) + r" in one deployment \(CloudFormation allows 500"):
        validate_deployment(raw)


ARN = "arn:aws:iam::123456789012:user/"


@pytest.mark.parametrize("path, value, message", [
    ("pools.0.max_gpus", 10**12, "pools[0].max_gpus: is 1,000,000,000,000, at most 16,384 GPUs in one deployment"),
    ("pools.0.max_gpus", 16_385, "pools[0].max_gpus: is 16,385, at most 16,384 GPUs in one deployment"),
    ("pools.1.max_gpus", 16_377, "pools: hold 16,393 GPUs together (max_gpus), at most 16,384 in one deployment"),
    ("teams.0.members", [f"user{i}" for i in range(21)], "teams[0].members: has 21 entries, at most 20 a team"),
    ("teams.0.members", [ARN + "a" * 98], "teams[0].members[0]: is 129 characters, at most 128"),
    ("teams", [{"name": f"t{i}", "members": [f"t{i}-user{j}" for j in range(20)]} for i in range(13)],
     "teams: list 260 members together, at most 250 in one deployment"),
    ("alerts", {"emails": [f"ops{i}@example.com" for i in range(6)],
                "approval_emails": [f"approver{i}@example.com" for i in range(5)]},
     "alerts.approval_emails: 6 emails and 5 approval_emails, at most 10 addresses together"),
    ("alerts.emails", [f"ops{i}@example.com" for i in range(10)],
     "alerts.approval_emails: 10 emails and 1 approval_emails, at most 10 addresses together"),
])
def test_sizes_beyond_what_one_template_holds_are_refused(raw, path, value, message):
    _set(path, value)(raw)
    assert _refused(raw).startswith(f"deployment.yaml: {message}")


def test_the_largest_sizes_allowed_are_accepted(raw):
    raw["pools"][0]["max_gpus"], raw["pools"][1]["max_gpus"] = 16_000, 384
    raw["teams"] = [{"name": f"t{i}", "members": [ARN + f"t{i}-" + "u" * (93 - len(str(i))) + f"{j:02d}"
                                                  for j in range(20)]} for i in range(13)]
    raw["teams"][12]["members"] = raw["teams"][12]["members"][:10]
    raw["alerts"] = {"emails": [f"ops{i}@example.com" for i in range(9)], "approval_emails": ["a@example.com"]}
    config = validate_deployment(raw)
    assert sum(len(t.members) for t in config.teams) == 250 and {len(m) for t in config.teams
                                                                   for m in t.members} == {128}


def test_the_environment_is_counted_as_lambda_counts_it(raw):
    """Lambda measures the variables as JSON: every quote inside GQA_POOLS and GQA_ACCESS counts
    twice, and each variable its quotes, colon and comma."""
    from gqa.models.deployment import environment_bytes

    assert environment_bytes({"K": "v"}) == len('{"K":"v"}')
    assert environment_bytes({"GQA_ACCESS": '{"admins": []}'}) == len('{"GQA_ACCESS":"{\\"admins\\": []}"}')
    admins = [f"arn:aws:iam::123456789012:user/platform-admin-{i:03d}" for i in range(43)]
    raw["access"]["admins"] = admins[:42]
    settings = validate_deployment(raw).function_settings()
    assert environment_bytes(settings) == 3069   # of the 3,072 the stack's names leave
    raw["access"]["admins"] = admins   # 2,935 bytes as names and values alone
    with pytest.raises(SpecError, match=r"take 3,124 bytes as Lambda counts them \(GQA_ACCESS 2,[\d]{3}, "):
        validate_deployment(raw)
