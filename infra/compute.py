"""The GPU pools on AWS Batch: per pool of the deployment a managed EC2
compute environment that scales from zero, and the job queue gqa submits to
(named <prefix><pool name>, the name Deployment.pools_json() gives the
functions); one job definition per container image; the jobs' log group and
roles.

The instances:
- the ECS GPU-optimised AMI, Amazon Linux 2023 (ECS_AL2023_NVIDIA), or
  Amazon Linux 2 for a pool with p3 instances, which the AL2023 GPU AMI does
  not support; Batch picks the AMI's current release at each update;
- spot pools buy at SPOT_PRICE_CAPACITY_OPTIMIZED, on-demand ones at
  BEST_FIT_PROGRESSIVE: the strategies that let Batch update a compute
  environment in place;
- the ECS agent marks an instance DRAINING on a spot interruption notice, so
  no job starts on it; ECS leaves the jobs already there running (Batch jobs
  are standalone tasks, which draining does not stop), so the job's runtime
  reads the notice from the instance metadata itself and stops the job
  (gqa/runtime/spot_notice.py, job_process.py);
- the ECS agent waits the deployment's checkpoint grace between SIGTERM and
  SIGKILL on a stop, and the job definitions hand the same grace to the
  job's runtime (GQA_CHECKPOINT_GRACE) for a spot notice: the grace a job has
  to checkpoint;
- IMDSv2 only, with a hop limit of 2 so a job's container (bridge network,
  one hop beyond the host) reaches it; an encrypted root volume, no inbound
  network.

The queue cancels a job that waited RUNNABLE for an instance longer than the
deployment's capacity_wait, and, after Batch's minimum wait, a job that fits
no instance of the pool; batch_events.classify reads the first as no capacity
(gqa retries it) and leaves the second to be the job's error."""

from __future__ import annotations

import math
import re

import aws_cdk as cdk
from aws_cdk import aws_batch as batch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from gqa.models.batch_events import CAPACITY_WAIT_REASON, MISFIT_REASONS
from gqa.models.deployment import Deployment, PoolConfig
from gqa.models.gpu_instances import AL2_ONLY_FAMILIES, listed_shape
from gqa.models.trigger import MANIFEST_ROOT
from gqa.runtime.job_process import GRACE_ENV

from .checkpoints import Checkpoints
from .nag import acknowledge, acknowledge_wildcards
from .network import Network


SPOT_STRATEGY = "SPOT_PRICE_CAPACITY_OPTIMIZED"
ON_DEMAND_STRATEGY = "BEST_FIT_PROGRESSIVE"
MISFIT_WAIT = 600                   # Batch's minimum wait before a job state time limit action
ROOT_VOLUME_GIB = 100               # CUDA images are 10 GiB and more, unpacked; jobs write scratch data
IMDS_HOPS = 2                       # bridge-mode containers are one hop beyond the host: the job reads spot notices
JOB_VCPUS, JOB_MEMORY_MIB = 4, 14 * 1024   # a one-GPU job's, as BatchCompute sizes it; submissions override
SHARED_MEMORY_GIB = 8               # /dev/shm for PyTorch DataLoader workers (Docker's 64 MiB is too small)
JOB_LOGS_KEPT = logs.RetentionDays.THREE_MONTHS
_BOUNDARY = "==GQA-BOUNDARY=="
_ECR_IMAGE = re.compile(r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?P<china>\.cn)?"
                        r"/(?P<repository>[^:@]+)")


def max_vcpus(pool: PoolConfig) -> int:
    """The compute environment's ceiling: max_gpus GPUs on the pool's hungriest instance type."""
    # max_gpus GPUs whichever of the types Batch picks: the ceiling may let Batch hold more on the
    # leaner types, but Batch launches only for jobs waiting, and gqa never submits more than
    # max_gpus GPUs' worth to a pool
    per_gpu = max(math.ceil(vcpus / gpus) for vcpus, gpus in (listed_shape(t) for t in pool.instance_types))
    return pool.max_gpus * per_gpu


def image_type(pool: PoolConfig) -> str:
    families = {t.partition(".")[0] for t in pool.instance_types}
    return "ECS_AL2_NVIDIA" if families & AL2_ONLY_FAMILIES else "ECS_AL2023_NVIDIA"


def ecs_settings(grace: int) -> list[str]:
    """The ECS agent's settings, appended to /etc/ecs/ecs.config."""
    return ["ECS_ENABLE_SPOT_INSTANCE_DRAINING=true",      # no job starts on an instance under notice
            f"ECS_CONTAINER_STOP_TIMEOUT={grace}s",        # a stop's SIGKILL this long after its SIGTERM
            "ECS_IMAGE_PULL_BEHAVIOR=prefer-cached"]       # an instance pulls an image once (registry pull limits)


def user_data(grace: int) -> str:
    """The launch template's user data; Batch merges its own, so it must be MIME multipart."""
    return "\n".join([
        "MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{_BOUNDARY}"', "",
        f"--{_BOUNDARY}", 'Content-Type: text/x-shellscript; charset="us-ascii"', "",
        "#!/bin/bash", "cat >> /etc/ecs/ecs.config <<'EOF'", *ecs_settings(grace), "EOF", "",
        f"--{_BOUNDARY}--", ""])


class GpuPools(Construct):
    """`job_queues` by pool name, `job_definitions` by definition name, the
    jobs' `job_role` and `log_group`."""

    def __init__(self, scope: Construct, id: str, *, config: Deployment, network: Network,
                 checkpoints: Checkpoints) -> None:
        super().__init__(scope, id)
        removal = cdk.RemovalPolicy.RETAIN if config.retain_data else cdk.RemovalPolicy.DESTROY
        ceilings = {pool.pool_name: max_vcpus(pool) for pool in config.pools}
        launch_template = self._launch_template(config)
        profile = self._instance_profile()
        self.job_queues: dict[str, batch.CfnJobQueue] = {}
        self.compute_environments: dict[str, batch.CfnComputeEnvironment] = {}
        for pool in config.pools:
            name = f"{config.prefix}{pool.pool_name}"
            # unnamed: a change Batch cannot make in place replaces it, which a fixed name would block
            environment = batch.CfnComputeEnvironment(
                self, f"{pool.pool_name}-environment", type="MANAGED", state="ENABLED",
                replace_compute_environment=False,   # instance types, template, AMI: updated in place
                compute_resources=batch.CfnComputeEnvironment.ComputeResourcesProperty(
                    type="SPOT" if pool.spot else "EC2",
                    allocation_strategy=SPOT_STRATEGY if pool.spot else ON_DEMAND_STRATEGY,
                    minv_cpus=0, maxv_cpus=ceilings[pool.pool_name], instance_types=list(pool.instance_types),
                    subnets=network.subnet_ids, security_group_ids=[network.security_group.security_group_id],
                    instance_role=profile.instance_profile_arn,
                    launch_template=batch.CfnComputeEnvironment.LaunchTemplateSpecificationProperty(
                        launch_template_id=launch_template.ref, version=launch_template.attr_latest_version_number),
                    ec2_configuration=[batch.CfnComputeEnvironment.Ec2ConfigurationObjectProperty(
                        image_type=image_type(pool))],
                    update_to_latest_image_version=True,
                    tags={"Name": name, "gqa:pool": pool.pool_name, "gqa:deployment": config.name}))
            self.compute_environments[pool.pool_name] = environment
            self.job_queues[pool.pool_name] = batch.CfnJobQueue(
                self, f"{pool.pool_name}-queue", job_queue_name=name, priority=1, state="ENABLED",
                compute_environment_order=[batch.CfnJobQueue.ComputeEnvironmentOrderProperty(
                    compute_environment=environment.attr_compute_environment_arn, order=1)],
                job_state_time_limit_actions=[
                    _cancel_after(CAPACITY_WAIT_REASON, config.compute.capacity_wait),
                    *(_cancel_after(reason, MISFIT_WAIT) for reason in MISFIT_REASONS)])

        self.log_group = logs.LogGroup(self, "JobLogs", log_group_name=f"/aws/batch/{config.prefix}jobs",
                                       retention=JOB_LOGS_KEPT, removal_policy=removal)
        self.job_role = iam.Role(self, "JobRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
                                 description=f"gqa {config.name} jobs: their checkpoints and code")
        checkpoints.grant_jobs(self.job_role)
        acknowledge_wildcards(self.job_role, f"/{checkpoints.prefix}/*",
                              "objects under the checkpoint bucket's checkpoints/ prefix: each job writes its own "
                              "checkpoints/<job id>/ keys, which no policy can name in advance")
        checkpoints.grant_code_read(self.job_role)
        acknowledge_wildcards(self.job_role, f"/{checkpoints.code_prefix}/*",
                              "a job reads the code bundle it was submitted with, code/<sha256>.tar.gz, "
                              "named by its content at submission: read-only, under the code prefix")
        self._grant_trigger_data(config, checkpoints)
        self.execution_role = self._execution_role(config)
        self.job_definitions: dict[str, batch.EcsJobDefinition] = {}
        for name, image in config.job_definitions().items():
            container = batch.EcsEc2ContainerDefinition(
                self, f"{name}-container", image=ecs.ContainerImage.from_registry(image),
                cpu=JOB_VCPUS, memory=cdk.Size.mebibytes(JOB_MEMORY_MIB), gpu=1,
                # a spot notice's SIGTERM to SIGKILL, sent by the job's runtime: a stop's, as the agent waits
                environment={GRACE_ENV: str(config.compute.checkpoint_grace)},
                job_role=self.job_role, execution_role=self.execution_role,
                logging=ecs.LogDriver.aws_logs(stream_prefix="gqa", log_group=self.log_group),
                # an init process reaps DataLoader workers and passes SIGTERM on to the job
                linux_parameters=batch.LinuxParameters(self, f"{name}-linux", init_process_enabled=True,
                                                       shared_memory_size=cdk.Size.gibibytes(SHARED_MEMORY_GIB)))
            # one attempt: gqa decides retries; tags (team, job id) reach the ECS task for cost allocation
            self.job_definitions[name] = batch.EcsJobDefinition(
                self, f"{name}-definition", job_definition_name=name, container=container,
                propagate_tags=True, retry_attempts=1)

    # -- the parts --------------------------------------------------------------------------------
    def _grant_trigger_data(self, config: Deployment, checkpoints: Checkpoints) -> None:
        """A job a new upload started reads what was uploaded: the trigger buckets, read-only, and
        the key list of a burst too large to pass inline (a manifest in the checkpoint bucket)."""
        if not config.triggers.buckets:
            return
        checkpoints.grant_manifest_read(self.job_role)
        acknowledge_wildcards(self.job_role, f"/{MANIFEST_ROOT}*",
                              "a triggered job reads its burst's key list, named by its trigger and burst when "
                              "the burst closes: read-only, under the manifest prefix")
        arns = [f"arn:{cdk.Aws.PARTITION}:s3:::{name}" for name in config.triggers.buckets]
        self.job_role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=arns))
        self.job_role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{a}/*" for a in arns]))
        acknowledge(self.job_role, "IAM5", "a triggered job reads the objects whose upload started it, any key "
                                           "of the configured trigger buckets (read-only)",
                    applies_to=tuple(f"Resource::arn:<AWS::Partition>:s3:::{name}/*"
                                     for name in config.triggers.buckets))

    def _launch_template(self, config: Deployment) -> ec2.CfnLaunchTemplate:
        return ec2.CfnLaunchTemplate(
            self, "LaunchTemplate", launch_template_name=f"{config.prefix}gpu-instances",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_tokens="required", http_endpoint="enabled", http_put_response_hop_limit=IMDS_HOPS),
                block_device_mappings=[ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                    device_name="/dev/xvda",   # the root device of the ECS AL2 and AL2023 AMIs
                    ebs=ec2.CfnLaunchTemplate.EbsProperty(volume_size=ROOT_VOLUME_GIB, volume_type="gp3",
                                                          encrypted=True, delete_on_termination=True))],
                user_data=cdk.Fn.base64(user_data(config.compute.checkpoint_grace))))

    def _instance_profile(self) -> iam.InstanceProfile:
        role = iam.Role(self, "InstanceRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                        description="gqa GPU instances: the ECS agent",
                        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
                            "service-role/AmazonEC2ContainerServiceforEC2Role")])
        acknowledge(role, "IAM4", "the ECS agent on the Batch GPU instances needs the ECS-for-EC2 policy AWS "
                                  "maintains for it (joining the cluster, polling for tasks); jobs get the job role",
                    applies_to=("Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                                "AmazonEC2ContainerServiceforEC2Role",))
        return iam.InstanceProfile(self, "InstanceProfile", role=role)

    def _execution_role(self, config: Deployment) -> iam.Role:
        """Pulls the images (ECR repositories by name; public registries need nothing) and writes the logs."""
        role = iam.Role(self, "ExecutionRole", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
                        description=f"gqa {config.name} jobs' containers: image pulls and logs")
        self.log_group.grant_write(role)
        repositories = sorted({_ecr_repository_arn(m) for m in map(_ECR_IMAGE.match, config.job_definitions()
                                                                   .values()) if m})
        if repositories:
            role.add_to_policy(iam.PolicyStatement(
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                resources=repositories))
            role.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
            acknowledge(role, "IAM5", "ecr:GetAuthorizationToken names no resource; image reads are limited to "
                                      "the deployment's ECR repositories", applies_to=("Resource::*",))
        return role

    # -- what the functions' policies name ----------------------------------------------------------
    @property
    def job_queue_arns(self) -> list[str]:
        return [queue.attr_job_queue_arn for queue in self.job_queues.values()]

    @property
    def job_definition_arns(self) -> list[str]:
        """Each job definition, any revision: SubmitJob names it without one, and a
        change of image or settings registers a new revision."""
        stack = cdk.Stack.of(self)
        return [stack.format_arn(service="batch", resource="job-definition", resource_name=f"{name}:*",
                                 arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME) for name in self.job_definitions]

    @property
    def log_group_name(self) -> str:
        return self.log_group.log_group_name


def _cancel_after(reason: str, seconds: int) -> batch.CfnJobQueue.JobStateTimeLimitActionProperty:
    return batch.CfnJobQueue.JobStateTimeLimitActionProperty(
        state="RUNNABLE", action="CANCEL", reason=reason, max_time_seconds=seconds)


def _ecr_repository_arn(match: re.Match) -> str:
    partition = "aws-cn" if match["china"] else "aws"
    return f"arn:{partition}:ecr:{match['region']}:{match['account']}:repository/{match['repository']}"
