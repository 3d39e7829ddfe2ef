"""infra/compute.py: the GPU pools on AWS Batch, as their templates say,
checked by cdk-nag (support.template raises on any unacknowledged finding)."""

from __future__ import annotations

import json

import pytest

from gqa.models.errors import SpecError

from tests.infra import support

cdk = pytest.importorskip("aws_cdk")
from aws_cdk.assertions import Match  # noqa: E402

from gqa.models.batch_events import classify  # noqa: E402
from gqa.models.deployment import PoolConfig  # noqa: E402
from gqa.models.outcome import ExitKind  # noqa: E402

EXISTING = {"existing": {"vpc_id": "vpc-0123456789abcdef0",
                         "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]}}
ECR_IMAGE = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/train:7"


def build(config):
    """(stack, GpuPools, Template) for a deployment: checkpoints, network and pools in one stack."""
    from infra.checkpoints import Checkpoints
    from infra.compute import GpuPools
    from infra.network import Network

    stack = cdk.Stack(support.nagged_app(), "Pools")
    checkpoints = Checkpoints(stack, "Checkpoints", config=config)
    network = Network(stack, "Network", config=config)
    pools = GpuPools(stack, "GpuPools", config=config, network=network, checkpoints=checkpoints)
    return stack, pools, support.template(stack)


@pytest.fixture(scope="module")
def example():
    config = support.deployment()
    return (config, *build(config))


@pytest.fixture(scope="module")
def variant():
    """Another grace and wait, a V100 pool, an ECR image, an existing network, retained data."""
    values = support.example_values()
    values["pools"].append({"gpu_type": "v100", "spot": False, "instance_types": ["p3.2xlarge", "p3.8xlarge"],
                            "instance_gpus": 4, "max_gpus": 6, "price": 3.06})
    values["images"]["named"]["team.train"] = ECR_IMAGE
    config = support.deployment(pools=values["pools"], images=values["images"], network=EXISTING,
                                retain_data=True, compute={"checkpoint_grace": "45s", "capacity_wait": "1h"})
    return (config, *build(config))


def resources(template, kind):
    return list(template.find_resources(kind).values())


def environment_of(template, pool_name):
    found = [r for r in resources(template, "AWS::Batch::ComputeEnvironment")
             if r["Properties"]["ComputeResources"]["Tags"]["gqa:pool"] == pool_name]
    assert len(found) == 1
    return found[0]["Properties"]


# -- the compute environments ------------------------------------------------------------------
@pytest.mark.parametrize("pool_name, kind, strategy, max_vcpus, image", [
    # g5.12xlarge has 12 vCPUs per GPU, the most of the pool's types: 16 and 8 GPUs' worth
    ("a10g-spot", "SPOT", "SPOT_PRICE_CAPACITY_OPTIMIZED", 16 * 12, "ECS_AL2023_NVIDIA"),
    ("a10g-ondemand", "EC2", "BEST_FIT_PROGRESSIVE", 8 * 12, "ECS_AL2023_NVIDIA"),
])
def test_each_pool_is_a_managed_environment_that_scales_from_zero(example, pool_name, kind, strategy, max_vcpus,
                                                                  image):
    config, _, _, template = example
    pool = next(p for p in config.pools if p.pool_name == pool_name)
    props = environment_of(template, pool_name)
    assert (props["Type"], props["State"]) == ("MANAGED", "ENABLED")
    resources_ = props["ComputeResources"]
    assert (resources_["Type"], resources_["AllocationStrategy"]) == (kind, strategy)
    assert (resources_["MinvCpus"], resources_["MaxvCpus"]) == (0, max_vcpus)
    assert resources_["InstanceTypes"] == pool.instance_types
    assert resources_["Ec2Configuration"] == [{"ImageType": image}]
    assert "LaunchTemplate" in resources_ and "InstanceRole" in resources_
    template.resource_count_is("AWS::Batch::ComputeEnvironment", len(config.pools))


def test_a_v100_pool_runs_the_amazon_linux_2_gpu_image(variant):
    _, _, _, template = variant
    props = environment_of(template, "v100-ondemand")["ComputeResources"]
    # p3 is not supported by the AL2023 GPU AMI; p3.8xlarge has 8 vCPUs per GPU
    assert (props["Ec2Configuration"], props["MaxvCpus"]) == ([{"ImageType": "ECS_AL2_NVIDIA"}], 6 * 8)


@pytest.mark.parametrize("instance_types, max_gpus, max_vcpus", [
    (["g5.xlarge"], 8, 8 * 4),
    (["g5.xlarge", "g5.12xlarge"], 16, 16 * 12),
    (["g5.48xlarge"], 16, 16 * 24),
    (["g4dn.xlarge", "g4dn.metal"], 8, 8 * 12),
    (["g6e.2xlarge"], 3, 3 * 8),
    (["p4d.24xlarge", "p5.48xlarge"], 16, 16 * 24),
    (["p3.2xlarge"], 1, 8),
])
def test_max_vcpus_is_max_gpus_on_the_hungriest_instance_type(instance_types, max_gpus, max_vcpus):
    from infra.compute import max_vcpus as ceiling

    pool = PoolConfig(gpu_type="x", instance_types=instance_types, spot=True, max_gpus=max_gpus, price=1.0)
    assert ceiling(pool) == max_vcpus


@pytest.mark.parametrize("instance_type", ["g7.xlarge", "g5.3xlarge", "m5.large", "p4d.12xlarge"])
def test_an_instance_type_not_in_the_table_is_refused_with_its_place(instance_type):
    values = support.example_values()
    values["pools"][1]["instance_types"] = ["g5.xlarge", instance_type]
    with pytest.raises(SpecError, match=rf"^pools\[1\]\.instance_types\[1\]: '{instance_type}' is not a GPU "):
        support.deployment(pools=values["pools"])


# -- the instances ------------------------------------------------------------------------------
@pytest.mark.parametrize("which, grace", [("example", "90s"), ("variant", "45s")])
def test_the_instances_drain_on_spot_notice_and_stop_after_the_grace(request, which, grace):
    _, _, _, template = request.getfixturevalue(which)
    [launch_template] = resources(template, "AWS::EC2::LaunchTemplate")
    data = launch_template["Properties"]["LaunchTemplateData"]
    user_data = data["UserData"]["Fn::Base64"]
    assert user_data.startswith("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=")
    settings = user_data.split("cat >> /etc/ecs/ecs.config <<'EOF'\n")[1].split("\nEOF\n")[0].splitlines()
    assert "ECS_ENABLE_SPOT_INSTANCE_DRAINING=true" in settings
    assert f"ECS_CONTAINER_STOP_TIMEOUT={grace}" in settings
    assert user_data.isascii()
    # IMDSv2 only, reachable from a job's container one hop beyond the host: the job reads spot notices there
    assert data["MetadataOptions"] == {"HttpTokens": "required", "HttpEndpoint": "enabled",
                                       "HttpPutResponseHopLimit": 2}
    assert data["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True
    # every pool launches from it, at its latest version
    for environment in resources(template, "AWS::Batch::ComputeEnvironment"):
        spec = environment["Properties"]["ComputeResources"]["LaunchTemplate"]
        assert spec["Version"]["Fn::GetAtt"][1] == "LatestVersionNumber"


def test_the_instance_role_is_the_ecs_agents_behind_an_instance_profile(example):
    _, _, _, template = example
    template.has_resource_properties("AWS::IAM::Role", {
        "AssumeRolePolicyDocument": Match.object_like({"Statement": [Match.object_like(
            {"Principal": {"Service": "ec2.amazonaws.com"}})]}),
        "ManagedPolicyArns": [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                                                 ":iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role"]]}]})
    template.resource_count_is("AWS::IAM::InstanceProfile", 1)


# -- the job queues -------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["example", "variant"])
def test_each_queue_has_the_name_the_functions_submit_to_and_its_pools_environment(request, which):
    config, _, pools, template = request.getfixturevalue(which)
    wanted = [p["job_queue"] for p in json.loads(config.pools_json())]
    queues = template.find_resources("AWS::Batch::JobQueue")
    assert sorted(q["Properties"]["JobQueueName"] for q in queues.values()) == sorted(wanted)
    environments = template.find_resources("AWS::Batch::ComputeEnvironment")
    for queue in queues.values():
        [order] = queue["Properties"]["ComputeEnvironmentOrder"]
        environment = environments[order["ComputeEnvironment"]["Fn::GetAtt"][0]]
        assert environment["Properties"]["ComputeResources"]["Tags"]["Name"] == queue["Properties"]["JobQueueName"]
    assert list(pools.job_queues) == [p.pool_name for p in config.pools]


@pytest.mark.parametrize("which, wait", [("example", 4 * 3600), ("variant", 3600)])
def test_a_job_waiting_for_capacity_is_cancelled_after_the_capacity_wait(request, which, wait):
    _, _, _, template = request.getfixturevalue(which)
    for queue in resources(template, "AWS::Batch::JobQueue"):
        actions = queue["Properties"]["JobStateTimeLimitActions"]
        assert actions[0] == {"State": "RUNNABLE", "Action": "CANCEL", "MaxTimeSeconds": wait,
                              "Reason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"}
        # a job no instance of the pool fits is cancelled after Batch's least wait
        assert {(a["Reason"], a["MaxTimeSeconds"]) for a in actions[1:]} == {
            ("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT", 600),
            ("MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE", 600)}


@pytest.mark.parametrize("reason, kind", [
    ("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", ExitKind.CAPACITY),
    ("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT", ExitKind.APP),
    ("MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE", ExitKind.APP),
])
def test_the_classifier_reads_each_cancellation_the_queues_can_make(example, reason, kind):
    _, _, _, template = example
    reasons = {a["Reason"] for q in resources(template, "AWS::Batch::JobQueue")
               for a in q["Properties"]["JobStateTimeLimitActions"]}
    assert reason in reasons
    # what Batch writes on a job its queue cancelled
    status_reason = f"Canceled by JobStateTimeLimit action due to reason: {reason}"
    assert classify("FAILED", status_reason, None, None) == (kind, status_reason)


# -- the job definitions ----------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["example", "variant"])
def test_one_gpu_job_definition_per_image_logging_to_the_jobs_log_group(request, which):
    config, _, pools, template = request.getfixturevalue(which)
    [log_group_id] = template.find_resources("AWS::Logs::LogGroup", {
        "Properties": {"LogGroupName": "/aws/batch/gqa-dev-jobs"}})
    [job_role_id] = template.find_resources("AWS::IAM::Role", {"Properties": {"Description": Match.string_like_regexp(
        "jobs: their checkpoints")}})
    for name, image in config.job_definitions().items():
        template.has_resource_properties("AWS::Batch::JobDefinition", {
            "JobDefinitionName": name, "Type": "container", "PlatformCapabilities": ["EC2"],
            "PropagateTags": True, "RetryStrategy": {"Attempts": 1},
            "ContainerProperties": Match.object_like({
                "Image": image,
                "ResourceRequirements": Match.array_with([{"Type": "GPU", "Value": "1"}]),
                "JobRoleArn": {"Fn::GetAtt": [job_role_id, "Arn"]},
                "ExecutionRoleArn": Match.any_value(),
                "LogConfiguration": {"LogDriver": "awslogs", "Options": Match.object_like(
                    {"awslogs-group": {"Ref": log_group_id}})}})})
    template.resource_count_is("AWS::Batch::JobDefinition", len(config.job_definitions()))
    assert list(pools.job_definitions) == list(config.job_definitions())


@pytest.mark.parametrize("which, grace", [("example", "90"), ("variant", "45")])
def test_the_jobs_runtime_is_given_the_grace_a_spot_notice_leaves_before_sigkill(request, which, grace):
    config, _, _, template = request.getfixturevalue(which)
    definitions = resources(template, "AWS::Batch::JobDefinition")
    assert len(definitions) == len(config.job_definitions())
    for definition in definitions:
        environment = definition["Properties"]["ContainerProperties"]["Environment"]
        assert {"Name": "GQA_CHECKPOINT_GRACE", "Value": grace} in environment


@pytest.mark.parametrize("which, deletion", [("example", "Delete"), ("variant", "Retain")])
def test_the_jobs_log_group_follows_retain_data(request, which, deletion):
    _, _, _, template = request.getfixturevalue(which)
    template.has_resource("AWS::Logs::LogGroup", {
        "Properties": {"LogGroupName": "/aws/batch/gqa-dev-jobs", "RetentionInDays": 90},
        "DeletionPolicy": deletion})


def test_the_job_role_reaches_only_the_checkpoints_prefix_reads_its_code_and_the_trigger_buckets(example):
    config, stack, pools, _ = example
    document = stack.resolve(pools.job_role.node.find_child("DefaultPolicy").document)
    granted, triggers = {}, {}
    for statement in document["Statement"]:
        assert statement["Effect"] == "Allow"
        resource = json.dumps(statement["Resource"])
        into = triggers if "example-training-data" in resource else granted
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]):
            into.setdefault(action, []).append((resource, statement.get("Condition")))
    assert set(granted) == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"}
    for action in ("s3:PutObject", "s3:DeleteObject"):
        [(resource, condition)] = granted[action]
        assert resource.endswith('"/checkpoints/*"]]}') and condition is None
    # reads: its checkpoints, the code bundle it was submitted with and its burst's key list (read-only)
    reads = sorted(resource.rsplit('"', 3)[-2] for resource, condition in granted["s3:GetObject"] if condition is None)
    assert reads == ["/checkpoints/*", "/code/*", "/gqa-trigger-manifests/*"] and len(granted["s3:GetObject"]) == 3
    listings = sorted(condition["StringLike"]["s3:prefix"] for resource, condition in granted["s3:ListBucket"])
    assert listings == [["checkpoints/*", "checkpoints/"], ["code/*", "code/"]]
    assert not any("checkpoints" in resource or "code" in resource for resource, _ in granted["s3:ListBucket"])
    # a triggered job reads the data that started it, and writes nothing there
    assert config.triggers.buckets == ["example-training-data"]
    assert set(triggers) == {"s3:GetObject", "s3:ListBucket"}
    assert triggers["s3:GetObject"][0][0].endswith(':s3:::example-training-data/*"]]}')
    assert triggers["s3:ListBucket"][0][0].endswith(':s3:::example-training-data"]]}')


def manifest_grants(stack, pools) -> list[tuple[list[str], dict | None]]:
    """(actions, condition) of each job role statement that names the trigger manifests' prefix."""
    document = stack.resolve(pools.job_role.node.find_child("DefaultPolicy").document)
    return [([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"],
             statement.get("Condition")) for statement in document["Statement"]
            if "gqa-trigger-manifests" in json.dumps(statement)]


def test_a_triggered_job_reads_its_bursts_manifest_and_nothing_else_of_the_manifests(example):
    """A large burst's key list is written to gqa-trigger-manifests/<trigger>/<burst>.txt in the
    checkpoint bucket and named by GQA_TRIGGER_MANIFEST: the job must be able to GET it."""
    _, stack, pools, _ = example
    document = stack.resolve(pools.job_role.node.find_child("DefaultPolicy").document)
    [resource] = [statement["Resource"] for statement in document["Statement"]
                  if "gqa-trigger-manifests" in json.dumps(statement)]
    assert resource["Fn::Join"][1][-1] == "/gqa-trigger-manifests/*"
    assert manifest_grants(stack, pools) == [(["s3:GetObject"], None)]


def test_a_deployment_without_triggers_grants_no_manifest_reads():
    config = support.deployment(triggers={"buckets": []})
    stack, pools, _ = build(config)
    assert manifest_grants(stack, pools) == []


@pytest.mark.parametrize("which, ecr", [("example", False), ("variant", True)])
def test_the_execution_role_pulls_from_the_deployments_ecr_repositories_only(request, which, ecr):
    _, stack, pools, _ = request.getfixturevalue(which)
    document = stack.resolve(pools.execution_role.node.find_child("DefaultPolicy").document)
    resources_ = [s["Resource"] for s in document["Statement"]]
    assert ("arn:aws:ecr:eu-west-1:123456789012:repository/team/train" in resources_) is ecr
    assert ("*" in resources_) is ecr          # GetAuthorizationToken, for ECR only


# -- what the functions' policies name -----------------------------------------------------------------
def test_the_arns_submissions_must_match(example):
    config, stack, pools, _ = example
    assert [stack.resolve(a) for a in pools.job_definition_arns] == [
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":batch:", {"Ref": "AWS::Region"}, ":",
                           {"Ref": "AWS::AccountId"}, f":job-definition/{name}:*"]]}
        for name in config.job_definitions()]
    assert [stack.resolve(a)["Fn::GetAtt"][1] for a in pools.job_queue_arns] == ["JobQueueArn"] * len(config.pools)
    assert stack.resolve(pools.log_group_name) == {"Ref": stack.get_logical_id(pools.log_group.node.default_child)}


def test_an_existing_network_is_used_as_given(variant):
    _, _, _, template = variant
    template.resource_count_is("AWS::EC2::VPC", 0)
    for environment in resources(template, "AWS::Batch::ComputeEnvironment"):
        assert environment["Properties"]["ComputeResources"]["Subnets"] == EXISTING["existing"]["subnet_ids"]


def test_the_pools_pass_cdk_nag_with_the_checkpoints_in_another_stack():
    """As the app builds them: the checkpoint bucket in the data stack, its grants imported here."""
    from infra.checkpoints import Checkpoints
    from infra.compute import GpuPools
    from infra.network import Network

    config = support.deployment()
    app = support.nagged_app()
    data, service = cdk.Stack(app, "Data"), cdk.Stack(app, "Service")
    checkpoints = Checkpoints(data, "Checkpoints", config=config)
    pools = GpuPools(service, "GpuPools", config=config, network=Network(service, "Network", config=config),
                     checkpoints=checkpoints)
    template = support.template(service)
    document = service.resolve(pools.job_role.node.find_child("DefaultPolicy").document)
    assert "Fn::ImportValue" in json.dumps(document)
    template.resource_count_is("AWS::Batch::JobQueue", len(config.pools))
