"""The sections of a deployment file (deployment.py holds the whole): the
GPU pools, the teams, access, the queue's limits, the tiers, approval,
compute, alerts, the trigger buckets, the container images and the network.
Each validates its own fields; checks across sections are the Deployment's."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from .deployment_shapes import (
    _AT,
    DEFAULT_IMAGE,
    EMAIL_RE,
    GPU_TYPE_RE,
    IDENTITY_WANTED,
    IMAGE_KEY_RE,
    IMAGE_URI_RE,
    INSTANCE_TYPE_RE,
    MAX_BUCKETS,
    MAX_EMAILS,
    MAX_GPUS,
    MAX_IMAGES,
    MAX_MEMBER_CHARS,
    MAX_MEMBERS,
    POOL_NAME_RE,
    ROLE_PATTERN_RE,
    SUBNET_ID_RE,
    VPC_ID_RE,
    NonNegative,
    PositiveInt,
    _at,
    _each,
    _is_identity,
    _shaped,
    _slug,
    _Strict,
    _unique,
    bucket_name_problem,
)
from .gpu_instances import instance_shape, known_families
from .spec import NAME_RE, Duration, Priority
from .trigger import MANIFEST_ROOT, MAX_KEY_BYTES, TriggerBucket


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

    @field_validator("max_gpus")
    @classmethod
    def _max_gpus(cls, value: int) -> int:
        if value > MAX_GPUS:
            raise ValueError(f"is {value:,}, at most {MAX_GPUS:,} GPUs in one deployment; split the GPUs across "
                             f"deployments")
        return value

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
    def _fits_instances(self) -> PoolConfig:
        if self.instance_gpus is not None and self.instance_gpus > self.largest_instance_gpus:
            raise _at(("instance_gpus",), f"is {self.instance_gpus}, but the pool's largest instance type has "
                                          f"{self.largest_instance_gpus} GPUs")
        return self

    @property
    def largest_instance_gpus(self) -> int:
        """GPUs on the pool's largest instance type: no job container can hold more."""
        shapes = [instance_shape(t) for t in self.instance_types]
        return max(shape[1] for shape in shapes if shape is not None)   # each one listed, checked above

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
        if len(values) > MAX_MEMBERS:
            raise ValueError(f"has {len(values)} entries, at most {MAX_MEMBERS} a team (each goes into the "
                             f"stack's template, which CloudFormation limits to 1 MB): one pattern with * "
                             f"covers many")
        for i, value in enumerate(values):
            if len(value) > MAX_MEMBER_CHARS:
                raise _at((i,), f"is {len(value):,} characters, at most {MAX_MEMBER_CHARS}: end the pattern "
                                f"with * sooner")
        return _each(values, _is_identity, IDENTITY_WANTED, "member")

    @model_validator(mode="after")
    def _consistent(self) -> TeamConfig:
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


# A spot instance gets two minutes' notice: SIGTERM to SIGKILL must fit in it, with
# time left for the job's runtime to see the notice (it reads it every 5 s) and to exit.
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
    keeping their place) for waiting jobs of a higher tier. In a time-sliced
    tier, a job that has had `slice_after` of GPU time ranks after the jobs of
    its tier that have not, and they may preempt it (Tiresias' two-queue LAS:
    for tiers whose jobs checkpoint when stopped)."""

    preemptible: list[str] = []
    time_sliced: list[str] = []
    slice_after: Annotated[Duration, Field(ge=60)] = 3250   # GPU-time: GPUs x seconds run

    @field_validator("time_sliced")
    @classmethod
    def _time_sliced(cls, values: list[str]) -> list[str]:
        tiers = [p.value for p in Priority]
        for i, value in enumerate(values):
            if value not in tiers:
                raise _at((i,), f"must be one of {', '.join(tiers)}, got {value!r}")
        _unique(values, "tier")
        return values

    @property
    def slice_ranks(self) -> tuple[int, ...]:
        return tuple(sorted(Priority(t).rank for t in self.time_sliced))

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

    @model_validator(mode="after")
    def _few(self) -> Alerts:
        given = len(self.emails) + len(self.approval_emails)
        if given > MAX_EMAILS:
            where = "approval_emails" if self.approval_emails else "emails"
            raise _at((where,), f"{len(self.emails)} emails and {len(self.approval_emails)} approval_emails, "
                                f"at most {MAX_EMAILS} addresses together (each is an SNS subscription, a "
                                f"resource of the stack, which CloudFormation limits to 500): send to a "
                                f"mailing list")
        return self


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
    Annotated[str, Tag("str")] | Annotated[TriggerBucketConfig, Tag("mapping(name, prefixes)")],
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


def _bucket_name(entry: str | TriggerBucketConfig) -> str:
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
    def _one(self) -> Network:
        if (self.create is None) == (self.existing is None):
            raise ValueError("give one of create: {} (a new VPC) or existing: {vpc_id, subnet_ids}")
        return self
