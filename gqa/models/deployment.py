"""One gqa deployment on AWS, described by one file: its name, whether it
keeps its data when deleted, the GPU pools, the teams, who administers and
approves, the queue's limits, where alerts go, the buckets that trigger jobs,
the container images and the network. Platform engineers write it as YAML
(examples/deployment.yaml), or inline in cdk.json's context; the stacks and
the functions' settings are derived from it, so the two cannot disagree.

Every problem becomes one SpecError naming the field path and, from a file,
its line: `deployment.yaml:12: pools[1].max_gpus: must be greater than 0`.

Pure: the models validate; load_deployment() reads the one file it is given
through the bounded YAML loader. Nothing here deploys anything."""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator,
                      model_validator)
from pydantic_core import PydanticCustomError

from .errors import SpecError
from .gpu_instances import instance_shape, known_families
from .limits import MAX_SPEC_BYTES, size_text
from .spec import NAME_RE, Duration, Priority
from .trigger import MANIFEST_ROOT, MAX_KEY_BYTES, TriggerBucket

# The default container image: public, CUDA and PyTorch. Mirror it to ECR for
# production (Docker Hub limits anonymous pulls).
DEFAULT_IMAGE = "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"

# -- shapes ------------------------------------------------------------------------------------
# The deployment's name goes into every resource name, S3 buckets included: lowercase, short.
# CloudFormation allows 500 resources in a stack. Each team adds a settings write and
# two budget alarms, each pool a compute environment and a job queue, each image a job
# definition, each trigger bucket a rule, a notification and a permission: at these
# ceilings together the service stack stays under it (tests/infra/test_limits.py).
MAX_TEAMS, MAX_POOLS, MAX_IMAGES, MAX_BUCKETS = 100, 8, 10, 10

DEPLOYMENT_NAME_RE = re.compile(r"^[a-z](?:[a-z0-9-]{0,14}[a-z0-9])?$")
# Pools and GPU types go into Batch queue and compute environment names: letters, digits, - and _.
POOL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$")
GPU_TYPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
# family.size: g5.xlarge, p4d.24xlarge, g6e.12xlarge, p5.48xlarge
INSTANCE_TYPE_RE = re.compile(r"^[a-z][a-z0-9-]*[0-9][a-z0-9-]*\.[a-z0-9][a-z0-9-]*$")
# arn:partition:iam|sts::account:resource, shell-style * and ? allowed where AccessPolicy matches them
ARN_PATTERN_RE = re.compile(r"^arn:(?:aws|aws-cn|aws-us-gov|\*):(?:iam|sts|\*)::(?:[0-9]{12}|[0-9]*[*?][0-9*?]*):\S+$")
NAME_PATTERN_RE = re.compile(r"^[A-Za-z0-9*?][A-Za-z0-9._@+=/*?-]{0,128}$")
ROLE_PATTERN_RE = re.compile(r"^[A-Za-z0-9+=,.@_*?-]{1,64}$")   # IAM role names, with * and ?
EMAIL_RE = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# what a job spec's `image:` names; '.' becomes '_' in the job definition's name
IMAGE_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# [registry[:port]/]path[:tag][@sha256:digest], the path's components lowercase
IMAGE_URI_RE = re.compile(r"^(?:(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(?::[0-9]+)?/|[A-Za-z0-9-]+:[0-9]+/)?"
                          r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
                          r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
                          r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$")
VPC_ID_RE = re.compile(r"^vpc-(?:[0-9a-f]{8}|[0-9a-f]{17})$")
SUBNET_ID_RE = re.compile(r"^subnet-(?:[0-9a-f]{8}|[0-9a-f]{17})$")

# The pydantic error type of a cross-field problem: its context names the path below the model.
_AT = "gqa_deployment_at"


def _at(path: tuple, message: str) -> PydanticCustomError:
    return PydanticCustomError(_AT, "{message}", {"message": message, "path": list(path)})


def _shaped(value: str, pattern: re.Pattern, what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"must be {what}, got {value!r}")
    return value


def _each(values: list[str], ok, wanted: str, what: str) -> list[str]:
    """Every value passes `ok` (else "must be <wanted>, got ..." at its index) and none is given twice."""
    for i, value in enumerate(values):
        if not ok(value):
            raise _at((i,), f"must be {wanted}, got {value!r}")
    _unique(values, what)
    return values


def _unique(values: list, what: str = "value") -> None:
    seen: set = set()
    for i, value in enumerate(values):
        if value in seen:
            raise _at((i,), f"{what} {value!r} is given twice")
        seen.add(value)


PositiveInt = Annotated[int, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, str_strip_whitespace=True)


# -- the parts ---------------------------------------------------------------------------------
class PoolConfig(_Strict):
    """A GPU type bought one way (spot or on demand), up to max_gpus: one
    Batch compute environment and its job queue (resources.Pool)."""

    name: str | None = None               # default: <gpu_type>-spot or <gpu_type>-ondemand
    gpu_type: str                         # what job specs ask for in resources.gpu_type
    instance_types: Annotated[list[str], Field(min_length=1)]
    spot: bool
    max_gpus: PositiveInt
    price: NonNegative                    # USD per GPU-hour, for budgets and approvals
    instance_gpus: PositiveInt | None = None   # the most GPUs a job may take (default: the largest type's)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else _shaped(value, POOL_NAME_RE, "a pool name (letters, digits, '-', '_')")

    @field_validator("gpu_type")
    @classmethod
    def _gpu_type(cls, value: str) -> str:
        return _shaped(value, GPU_TYPE_RE, "a GPU type such as a10g (letters, digits, '-', '_')")

    @field_validator("instance_types")
    @classmethod
    def _instance_types(cls, values: list[str]) -> list[str]:
        for i, value in enumerate(values):
            if not INSTANCE_TYPE_RE.match(value):
                raise _at((i,), f"must be an EC2 instance type such as g5.xlarge, got {value!r}")
            if instance_shape(value) is None:
                raise _at((i,), f"{value!r} is not a GPU instance type gqa knows (families {known_families()}; "
                                f"a new one is a line in gqa/models/gpu_instances.py)")
        _unique(values, "instance type")
        return values

    @model_validator(mode="after")
    def _fits_instances(self) -> "PoolConfig":
        if self.instance_gpus is not None and self.instance_gpus > self.largest_instance_gpus:
            raise _at(("instance_gpus",), f"is {self.instance_gpus}, but the pool's largest instance type has "
                                          f"{self.largest_instance_gpus} GPUs")
        return self

    @property
    def largest_instance_gpus(self) -> int:
        """GPUs on the pool's largest instance type: no job container can hold more."""
        return max(instance_shape(t)[1] for t in self.instance_types)

    @property
    def pool_name(self) -> str:
        return self.name or f"{self.gpu_type}-{'spot' if self.spot else 'ondemand'}"


class TeamConfig(_Strict):
    """A team's fair share and quotas (scheduling.TeamPolicy) and who is in it."""

    name: str
    share: Annotated[float, Field(gt=0)] = 1.0
    max_gpus: PositiveInt | None = None
    max_gpus_per_user: PositiveInt | None = None
    budget: NonNegative | None = None     # USD per calendar month
    stop_at_budget: bool = False
    members: list[str] = []               # IAM ARN patterns or user names

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _shaped(value, NAME_RE, "a team name (letters, digits, '.', '-', '_')")

    @field_validator("members")
    @classmethod
    def _members(cls, values: list[str]) -> list[str]:
        _each(values, _is_identity, IDENTITY_WANTED, "member")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> "TeamConfig":
        if self.max_gpus is not None and self.max_gpus_per_user is not None and self.max_gpus_per_user > self.max_gpus:
            raise _at(("max_gpus_per_user",), f"is {self.max_gpus_per_user}, more than the team's "
                                              f"max_gpus ({self.max_gpus})")
        if self.stop_at_budget and self.budget is None:
            raise _at(("stop_at_budget",), "needs a budget to stop at")
        return self


class AccessConfig(_Strict):
    """Who administers and who approves (services.access.AccessPolicy)."""

    admins: list[str] = []
    approvers: list[str] = []
    identity_roles: list[str] = []        # role-name patterns whose session names AWS sets, e.g. AWSReservedSSO_*
    # the team callers listed in no team's members submit for; null: only members (and admins) may submit
    unlisted_team: str | None = "default"

    @field_validator("unlisted_team")
    @classmethod
    def _unlisted(cls, value: str | None) -> str | None:
        return None if value is None else _shaped(value, NAME_RE, "a team name (letters, digits, '.', '-', '_')")

    @field_validator("admins", "approvers")
    @classmethod
    def _people(cls, values: list[str]) -> list[str]:
        return _each(values, _is_identity, IDENTITY_WANTED, "pattern")

    @field_validator("identity_roles")
    @classmethod
    def _roles(cls, values: list[str]) -> list[str]:
        return _each(values, ROLE_PATTERN_RE.match, "an IAM role name pattern such as AWSReservedSSO_*", "pattern")


class QueueLimits(_Strict):
    """The queue policy's limits (scheduling.Policy)."""

    max_gpus_per_job: PositiveInt | None = None
    max_wall_time: Duration | None = None   # 90m, 4h, 3d; a bare number is minutes
    half_life: Duration = 7 * 86400          # fair-share usage decay


# A spot instance gets two minutes' notice: SIGTERM to SIGKILL must fit in it,
# with time left for the ECS agent to drain the instance.
MAX_SPOT_GRACE = 110
# AWS Batch's bounds for a job queue's job state time limit (maxTimeSeconds)
CAPACITY_WAIT_BOUNDS = (600, 86400)


class ComputeSettings(_Strict):
    """How the pools' instances treat the jobs on them."""

    # SIGTERM to SIGKILL when a job is stopped or its spot instance reclaimed:
    # the ECS agent's ECS_CONTAINER_STOP_TIMEOUT, and the grace Batch timeouts add
    checkpoint_grace: Annotated[Duration, Field(ge=10, le=MAX_SPOT_GRACE)] = 90
    # a job RUNNABLE this long with no instance for it is cancelled as "no capacity":
    # gqa then retries it, or moves a spot job to on demand
    capacity_wait: Annotated[Duration, Field(ge=CAPACITY_WAIT_BOUNDS[0], le=CAPACITY_WAIT_BOUNDS[1])] = 4 * 3600


class Tiers(_Strict):
    """The priority tiers are a job spec's `priority` (high, normal, low): each
    has its own intake queue, and higher tiers start first. Running jobs of a
    preemptible tier are stopped (they checkpoint and go back to the queue,
    keeping their place) for waiting jobs of a higher tier."""

    preemptible: list[str] = []

    @field_validator("preemptible")
    @classmethod
    def _preemptible(cls, values: list[str]) -> list[str]:
        lower = [p.value for p in Priority][1:]   # nothing is above high
        for i, value in enumerate(values):
            if value not in lower:
                raise _at((i,), f"must be one of {', '.join(lower)} (a higher tier preempts it), got {value!r}")
        _unique(values, "tier")
        return values

    @property
    def preempt_ranks(self) -> tuple[int, ...]:
        return tuple(sorted(Priority(t).rank for t in self.preemptible))


class Approval(_Strict):
    """Jobs over any of these wait for an approver (none: no threshold)."""

    gpus: PositiveInt | None = None
    gpu_hours: Annotated[float, Field(gt=0)] | None = None
    cost: Annotated[float, Field(gt=0)] | None = None   # USD, the job's worst case


class Alerts(_Strict):
    emails: list[str] = []                # every alert: budgets, stuck jobs, idle GPUs, alarms, approvals
    approval_emails: list[str] = []       # only "job N waits for approval" (the approvers' inbox)

    @field_validator("emails", "approval_emails")
    @classmethod
    def _emails(cls, values: list[str]) -> list[str]:
        return _each(values, lambda v: len(v) <= 254 and EMAIL_RE.match(v), "an e-mail address such as ops@example.com",
                     "address")


MAX_BUCKET_PREFIXES = 10    # per trigger bucket: each goes into every function's environment (4 KB)


class TriggerBucketConfig(_Strict):
    """A trigger bucket whose triggers may watch only under `prefixes`."""

    name: str
    prefixes: Annotated[list[str], Field(min_length=1, max_length=MAX_BUCKET_PREFIXES)] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = bucket_name_problem(value)
        if problem:
            raise ValueError(f"{value!r} is not a valid S3 bucket name: {problem}")
        return value

    @field_validator("prefixes")
    @classmethod
    def _prefixes(cls, values: list[str] | None) -> list[str] | None:
        for i, value in enumerate(values or []):
            if len(value.encode()) > MAX_KEY_BYTES:
                raise _at((i,), f"is {len(value.encode())} bytes; an S3 key has at most {MAX_KEY_BYTES}")
            if value.startswith(MANIFEST_ROOT):
                raise _at((i,), f"keys under {MANIFEST_ROOT} are gqa's own trigger manifests, which no trigger "
                                f"may watch")
        _unique(values or [], "prefix")
        return values


def _bucket_entry(value: Any) -> str | None:
    return "str" if isinstance(value, str) else "mapping(name, prefixes)" if isinstance(value, dict) else None


# An entry is a bucket name (triggers may watch anywhere in it) or {name, prefixes}. The tags are
# the names of the two shapes, which error paths leave out (loader._real_loc).
TriggerBucketEntry = Annotated[
    Union[Annotated[str, Tag("str")], Annotated[TriggerBucketConfig, Tag("mapping(name, prefixes)")]],
    Discriminator(_bucket_entry, custom_error_type=_AT,
                  custom_error_message="must be a bucket name or a mapping {name, prefixes}",
                  custom_error_context={"message": "must be a bucket name or a mapping {name, prefixes}",
                                        "path": []})]


class Triggers(_Strict):
    """The S3 buckets whose new objects may trigger jobs: the stack sends their events to
    the trigger function (infra/events.py), and triggers may watch nowhere else."""

    buckets: Annotated[list[TriggerBucketEntry], Field(max_length=MAX_BUCKETS)] = []

    @field_validator("buckets")
    @classmethod
    def _buckets(cls, values: list) -> list:
        for i, value in enumerate(values):
            problem = bucket_name_problem(value) if isinstance(value, str) else None
            if problem:
                raise _at((i,), f"{value!r} is not a valid S3 bucket name: {problem}")
        _unique([_bucket_name(v) for v in values], "bucket")
        return values

    @property
    def bucket_names(self) -> list[str]:
        return [_bucket_name(v) for v in self.buckets]

    def allowed(self) -> tuple[TriggerBucket, ...]:
        """Each bucket and the prefixes triggers may watch in it (none: anywhere)."""
        return tuple(TriggerBucket(v, ()) if isinstance(v, str) else TriggerBucket(v.name, tuple(v.prefixes or ()))
                     for v in self.buckets)

    def buckets_json(self) -> str:
        """GQA_TRIGGER_BUCKETS: the JSON gqa.models.trigger.trigger_buckets_from_json reads."""
        return json.dumps([{"name": b.name, "prefixes": list(b.prefixes)} if b.prefixes else b.name
                           for b in self.allowed()], separators=(",", ":"))


def _bucket_name(entry: "str | TriggerBucketConfig") -> str:
    return entry if isinstance(entry, str) else entry.name


class Images(_Strict):
    default: str = DEFAULT_IMAGE          # what a job that names no image runs
    named: Annotated[dict[str, str], Field(max_length=MAX_IMAGES)] = {}   # a spec's `image:` -> container image URI

    @field_validator("default")
    @classmethod
    def _default(cls, value: str) -> str:
        return _shaped(value, IMAGE_URI_RE, "a container image such as pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime")

    @field_validator("named")
    @classmethod
    def _named(cls, values: dict[str, str]) -> dict[str, str]:
        seen: dict[str, str] = {}
        for key, uri in values.items():
            if not IMAGE_KEY_RE.match(key):
                raise _at((key,), f"image name {key!r} must be letters, digits, '.', '-', '_'")
            if not IMAGE_URI_RE.match(uri):
                raise _at((key,), f"must be a container image URI such as "
                                  f"123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1, got {uri!r}")
            slug = _slug(key)
            if slug in seen:
                raise _at((key,), f"images {seen[slug]!r} and {key!r} would share a job definition name")
            seen[slug] = key
        return values


class CreateVpc(_Strict):
    """A new VPC with public subnets and no NAT gateway (nothing to pay while idle)."""


class ExistingVpc(_Strict):
    vpc_id: str
    subnet_ids: Annotated[list[str], Field(min_length=1)]

    @field_validator("vpc_id")
    @classmethod
    def _vpc(cls, value: str) -> str:
        return _shaped(value, VPC_ID_RE, "a VPC id such as vpc-0123456789abcdef0")

    @field_validator("subnet_ids")
    @classmethod
    def _subnets(cls, values: list[str]) -> list[str]:
        return _each(values, SUBNET_ID_RE.match, "a subnet id such as subnet-0123456789abcdef0", "subnet")


class Network(_Strict):
    create: CreateVpc | None = None
    existing: ExistingVpc | None = None

    @model_validator(mode="after")
    def _one(self) -> "Network":
        if (self.create is None) == (self.existing is None):
            raise ValueError("give one of create: {} (a new VPC) or existing: {vpc_id, subnet_ids}")
        return self



# Lambda's limit on a function's environment variables, names and values together
LAMBDA_ENVIRONMENT_BYTES = 4096
STACK_SETTINGS_BYTES = 1024     # table names, queue URLs, bucket, topic and log group: about 500 today


# -- the deployment ----------------------------------------------------------------------------
class Deployment(_Strict):
    name: str                             # dev, prod: in every resource's name
    retain_data: bool                     # true: tables, buckets and logs outlive the stack
    pools: Annotated[list[PoolConfig], Field(min_length=1, max_length=MAX_POOLS)]
    teams: Annotated[list[TeamConfig], Field(max_length=MAX_TEAMS)] = []
    access: AccessConfig = AccessConfig()
    queue: QueueLimits = QueueLimits()
    tiers: Tiers = Tiers()
    approval: Approval = Approval()
    compute: ComputeSettings = ComputeSettings()
    alerts: Alerts = Alerts()
    triggers: Triggers = Triggers()
    images: Images = Images()
    network: Network = Network(create=CreateVpc())

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _shaped(value, DEPLOYMENT_NAME_RE,
                       "a short lowercase name such as dev or prod (a-z, 0-9, '-'; at most 16 characters)")

    @model_validator(mode="after")
    def _consistent(self) -> "Deployment":
        names: dict[str, int] = {}
        kinds: dict[tuple[str, bool], int] = {}
        for i, pool in enumerate(self.pools):
            kind = (pool.gpu_type, pool.spot)
            if kind in kinds:   # the scheduler tells pools apart by (type, spot) alone
                raise _at(("pools", i), f"pools[{kinds[kind]}] is already {pool.gpu_type} "
                                        f"{'spot' if pool.spot else 'on demand'}; raise its max_gpus instead")
            kinds[kind] = i
            if pool.pool_name in names:
                raise _at(("pools", i, "name"),
                          f"pool name {pool.pool_name!r} is taken by pools[{names[pool.pool_name]}]")
            names[pool.pool_name] = i
        teams: dict[str, int] = {}
        member_of: dict[str, str] = {}
        for i, team in enumerate(self.teams):
            if team.name in teams:
                raise _at(("teams", i, "name"), f"team {team.name!r} is already teams[{teams[team.name]}]")
            teams[team.name] = i
            for j, member in enumerate(team.members):
                if member in member_of:
                    raise _at(("teams", i, "members", j), f"{member!r} is already a member of team {member_of[member]}")
                member_of[member] = team.name
        return self

    @model_validator(mode="after")
    def _fits_a_function(self) -> "Deployment":
        # Lambda refuses a function whose environment (names and values) passes 4 KB; the stack adds
        # table names, queue URLs, bucket and log group names, and Powertools' settings to these
        sizes = {k: len(k) + len(v.encode()) for k, v in self.function_settings().items()}
        if sum(sizes.values()) > LAMBDA_ENVIRONMENT_BYTES - STACK_SETTINGS_BYTES:
            biggest = ", ".join(f"{k} {n:,}" for k, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:3])
            raise ValueError(f"the functions' settings from this file take {sum(sizes.values()):,} bytes ({biggest}); "
                             f"Lambda allows {LAMBDA_ENVIRONMENT_BYTES:,} for a function's whole environment, "
                             f"{STACK_SETTINGS_BYTES:,} of which the stack's names and URLs need: list fewer "
                             f"access patterns (one with * covers many), images or pools")
        return self

    # -- what the stacks and the functions are built from --------------------------------------
    @property
    def prefix(self) -> str:
        """The start of every resource name: gqa-dev-, gqa-prod-."""
        return f"gqa-{self.name}-"

    def pools_json(self) -> str:
        """GQA_POOLS: the JSON list resources.pools_from_json reads, each job
        queue named for this deployment."""
        return json.dumps([{"gpu_type": p.gpu_type, "spot": p.spot, "max_gpus": p.max_gpus, "price": p.price,
                            "job_queue": f"{self.prefix}{p.pool_name}", "instance_types": list(p.instance_types),
                            "instance_gpus": p.instance_gpus or p.largest_instance_gpus} for p in self.pools])

    def access_json(self) -> str:
        """GQA_ACCESS: the JSON services.access.AccessPolicy.from_json reads."""
        access: dict[str, Any] = {"admins": self.access.admins, "approvers": self.access.approvers,
                                  "identity_roles": self.access.identity_roles}
        if self.access.unlisted_team != "default":     # AccessPolicy's default: no bytes spent on it
            access["unlisted_team"] = self.access.unlisted_team
        return json.dumps(access)

    @property
    def default_job_definition(self) -> str:
        return f"{self.prefix}default"

    def job_definitions(self) -> dict[str, str]:
        """Batch job definition name -> the container image it runs: the
        default image's, then one per named image."""
        out = {self.default_job_definition: self.images.default}
        out.update({f"{self.prefix}image-{_slug(key)}": uri for key, uri in self.images.named.items()})
        return out

    def images_json(self) -> str:
        """GQA_IMAGES: a job spec's image -> the job definition that runs it."""
        return json.dumps({key: f"{self.prefix}image-{_slug(key)}" for key in self.images.named})

    def function_settings(self) -> dict[str, str]:
        """The functions' settings that come from this file (lambdas/environment.py);
        table names, queue URLs and bucket names come from the stacks."""
        return {"GQA_POOLS": self.pools_json(), "GQA_ACCESS": self.access_json(), "GQA_IMAGES": self.images_json(),
                "GQA_JOB_DEFINITION": self.default_job_definition,
                "GQA_CHECKPOINT_GRACE": str(self.compute.checkpoint_grace),
                "GQA_TRIGGER_BUCKETS": self.triggers.buckets_json()}


def _slug(key: str) -> str:
    return key.replace(".", "_")


IDENTITY_WANTED = "an IAM ARN pattern such as arn:aws:iam::123456789012:user/alice or a user name"


def _is_identity(value: str) -> bool:
    """An IAM ARN pattern, or a user-name pattern (AccessPolicy matches both)."""
    return bool((ARN_PATTERN_RE if value.startswith("arn:") else NAME_PATTERN_RE).match(value))


def bucket_name_problem(name: str) -> str | None:
    """Why `name` is not a general purpose S3 bucket name; None if it is one."""
    if not 3 <= len(name) <= 63:
        return "it must be 3 to 63 characters long"
    if not BUCKET_RE.match(name):
        return "use lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
    if ".." in name:
        return "it may not hold two adjacent periods"
    try:
        ipaddress.IPv4Address(name)
        return "it may not be an IP address"
    except ValueError:
        pass
    if name.startswith(BUCKET_PREFIXES) or name.endswith(BUCKET_SUFFIXES):
        return "that prefix or suffix is reserved by S3"
    return None


# -- loading -----------------------------------------------------------------------------------
FIELDS: dict[str, type[BaseModel]] = {
    "": Deployment, "pools": PoolConfig, "teams": TeamConfig, "access": AccessConfig, "queue": QueueLimits,
    "approval": Approval, "alerts": Alerts, "triggers": Triggers, "triggers.buckets": TriggerBucketConfig,
    "images": Images, "network": Network,
    "network.create": CreateVpc, "network.existing": ExistingVpc,
}


def load_deployment(path: str | Path) -> Deployment:
    """The deployment described by a YAML file."""
    source = str(path)
    raw, lines = _parse_yaml(_read(Path(path), source), source)
    return validate_deployment(raw, lines=lines, source=source)


def deployment_from_context(context: dict[str, Any], *, base_dir: str | Path) -> Deployment:
    """The deployment cdk.json's context describes: `gqa:config` holds the
    values themselves, or `gqa:config-file` names a YAML file (relative to
    base_dir, the app's directory)."""
    inline, file = context.get("gqa:config"), context.get("gqa:config-file")
    if inline is not None and file is not None:
        raise SpecError("give gqa:config or gqa:config-file, not both", source="cdk.json context")
    if file is not None:
        if not isinstance(file, str) or not file.strip():
            raise SpecError("gqa:config-file must name a YAML file", source="cdk.json context")
        full = Path(base_dir) / file.strip()
        raw, lines = _parse_yaml(_read(full, file.strip()), file.strip())
        return validate_deployment(raw, lines=lines, source=file.strip())
    if inline is None:
        raise SpecError("set gqa:config-file (a deployment YAML file, e.g. examples/deployment.yaml) "
                        "or gqa:config (its values)", source="cdk.json context")
    if isinstance(inline, str):   # `cdk deploy -c gqa:config='{...}'` passes a string
        try:
            inline = json.loads(inline)
        except ValueError:
            raise SpecError("is not JSON", source="gqa:config") from None
    return validate_deployment(inline, source="gqa:config")


def validate_deployment(raw: Any, *, lines: dict[tuple, int] | None = None, source: str | None = None) -> Deployment:
    if not isinstance(raw, dict):
        raise SpecError("a deployment must be a mapping (key: value lines)", line=1 if lines is not None else None,
                        source=source)
    try:
        return Deployment.model_validate(raw)
    except ValidationError as exc:
        raise _friendly(exc, lines or {}, source, raw) from None


def _read(full: Path, source: str) -> str:
    try:
        with full.open("rb") as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)
    except (FileNotFoundError, ValueError):
        raise SpecError(f"no such file: {source}") from None
    except IsADirectoryError:
        raise SpecError(f"{source} is a directory, not a deployment file") from None
    except OSError as exc:
        raise SpecError(f"cannot read {source}: {exc.strerror}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"larger than {size_text(MAX_SPEC_BYTES)}, the limit for a deployment file", source=source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("not a text file", source=source) from None


def _parse_yaml(text: str, source: str) -> tuple[Any, dict[tuple, int]]:
    from . import safe_yaml
    from .loader import _record_lines

    data, node = safe_yaml.load(text, source=source)
    lines: dict[tuple, int] = {}
    _record_lines(node, (), lines)
    return data, lines


def _friendly(exc: ValidationError, lines: dict[tuple, int], source: str | None, raw: Any) -> SpecError:
    from .loader import _real_loc

    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = _real_loc(err["loc"], raw)
    if err["type"] == _AT:
        loc += tuple(err["ctx"]["path"])
    line = _line_for(loc, lines)
    field = _path_text(loc)
    if err["type"] == "extra_forbidden":
        model = FIELDS.get(".".join(p for p in loc[:-1] if isinstance(p, str)))
        valid = sorted(model.model_fields) if model else []
        near = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
        hint = f"; did you mean {near[0]!r}?" if near else (f"; valid fields: {', '.join(valid)}" if valid else "")
        return SpecError(f"unknown field {field!r}{hint}", line=line, source=source)
    message = _message(err)
    return SpecError(f"{field}: {message}" if field else message, line=line, source=source)


def _message(err: dict) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "missing":
        return "is required"
    if kind == "too_short" and err.get("ctx", {}).get("min_length") == 1:
        return "must not be empty"
    if kind == "too_long":
        ctx = err.get("ctx", {})
        given = err.get("input")
        count = len(given) if isinstance(given, (list, dict)) else ctx.get("actual_length")
        return (f"has {count} entries, at most {ctx.get('max_length')} in one deployment "
                f"(CloudFormation allows 500 resources in a stack; split teams or pools across deployments)")
    if kind in ("bool_type", "int_type", "float_type", "string_type", "list_type", "dict_type", "model_type",
                "model_attributes_type"):
        want = {"bool_type": "true or false", "int_type": "a whole number", "float_type": "a number",
                "string_type": "text", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
                "model_attributes_type": "a mapping"}[kind]
        return f"must be {want}, got {_shown(err.get('input'))}"
    msg = msg.removeprefix("Value error, ")
    if err["loc"] and err["loc"][-1] in SECONDS_FIELDS and kind in ("greater_than_equal", "less_than_equal"):
        bound = err["ctx"]["ge" if kind == "greater_than_equal" else "le"]
        return f"must be {'at least' if kind == 'greater_than_equal' else 'at most'} {_duration_text(bound)}, " \
               f"got {_duration_text(_given_seconds(err['input']))}"
    if msg.startswith("Input should be "):
        msg = "must be " + msg.removeprefix("Input should be ")
    return msg


# fields given as durations ("90s", "4h"), whose bounds are told in the same words
SECONDS_FIELDS = ("checkpoint_grace", "capacity_wait")


def _given_seconds(value: Any) -> Any:
    """What the file gave, in seconds where it was a bare number (minutes, as in job specs)."""
    return value * 60 if isinstance(value, int) and not isinstance(value, bool) else value


def _duration_text(seconds: Any) -> str:
    if isinstance(seconds, str):
        return seconds[:40]   # as the file says it
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return _shown(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _path_text(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
