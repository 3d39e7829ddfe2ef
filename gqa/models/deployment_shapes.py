"""The shapes a deployment file's values must have, and the checks the
sections share: names that go into AWS resource names, IAM patterns, e-mail
addresses, bucket names, container images, VPC and subnet ids, and the
ceilings that keep a deployment's stack under CloudFormation's 500 resources.

A cross-field problem is raised as `_at(path, message)`, a pydantic error
whose context names the path below the model, so the loader can point at
the exact entry (deployment_errors.py)."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

# The default container image: public, CUDA and PyTorch. Mirror it to ECR for
# production (Docker Hub limits anonymous pulls).
DEFAULT_IMAGE = "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"

# -- shapes ------------------------------------------------------------------------------------
# The deployment's name goes into every resource name, S3 buckets included: lowercase, short.
# CloudFormation allows 500 resources in a stack. Each team adds a settings write and
# two budget alarms, each pool a compute environment and a job queue, each image a job
# definition, each trigger bucket a rule, a notification and a permission, each alert
# address an SNS subscription: at these ceilings together the service stack holds 496
# resources (486 with no address; tests/infra/test_limits.py).
MAX_TEAMS, MAX_POOLS, MAX_IMAGES, MAX_BUCKETS = 100, 8, 10, 10
MAX_EMAILS = 10             # alerts.emails and alerts.approval_emails together
# CloudFormation takes a template of at most 1,000,000 bytes (as `cdk deploy` uploads it,
# indented). Each team's settings write carries its members twice, escaped (about 2 bytes
# a character and 28 a member). The pools' inventory is stored as runs of alike GPUs, a few
# bytes a pool, and GPU by GPU too up to settings_codec.LISTED_GPUS (512; about 255 bytes a
# GPU in the template with 32-character GPU types, 110 in the settings item, which DynamoDB
# limits to 400 KB). At the other ceilings (a 16-character name, 100 teams with 63-character
# names, 10 alert addresses, 8 pools, 10 images, 10 buckets) and MAX_ALL_MEMBERS members of
# MAX_MEMBER_CHARS characters, the service template takes 852,625 bytes with 8 GPUs and
# 980,989 with 512 listed, its largest (tests/infra/test_limits.py).
MAX_MEMBERS, MAX_ALL_MEMBERS, MAX_MEMBER_CHARS = 20, 250, 128   # per team, in all, per pattern
# per pool, and the pools together: Batch's maxvCpus (12 a GPU on the largest instances) stays
# well within its 32-bit field, and a pass over them stays short (plan() with 10,000 pending
# and 8,000 running on 16,384 GPUs: 30 ms, against 10 ms on 2,000; benchmarks/plan_scaling.py)
MAX_GPUS = 16_384

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
    # allow_inf_nan: YAML's .inf and .nan pass a gt/ge bound (or, for NaN, slip past checks of the kind
    # x < 0): a share, budget or price must be a number
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, str_strip_whitespace=True,
                              allow_inf_nan=False)


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
