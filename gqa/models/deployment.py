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

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from .deployment_errors import spec_error
from .deployment_sections import (
    AccessConfig,
    Alerts,
    Approval,
    ComputeSettings,
    CreateVpc,
    ExistingVpc,
    Images,
    Network,
    PoolConfig,
    QueueLimits,
    TeamConfig,
    Tiers,
    TriggerBucketConfig,
    Triggers,
)
from .deployment_shapes import (DEFAULT_IMAGE, DEPLOYMENT_NAME_RE, MAX_ALL_MEMBERS, MAX_GPUS, MAX_POOLS, MAX_TEAMS,
                                _at, _shaped, _slug, _Strict)
from .errors import SpecError
from .limits import MAX_SPEC_BYTES, size_text

# what other modules read from here, wherever it is defined
__all__ = ["DEFAULT_IMAGE", "LAMBDA_ENVIRONMENT_BYTES", "STACK_SETTINGS_BYTES", "Deployment", "PoolConfig",
           "deployment_from_context", "environment_bytes", "load_deployment", "validate_deployment"]

# Lambda's limit on a function's environment: the variables map as JSON ({"K":"v",...}, every
# quote inside a value escaped), as its error says it measured
LAMBDA_ENVIRONMENT_BYTES = 4096
# What the stack adds to the api function, the one it adds most to (table names, queue URLs, the
# bucket, topic and log group, Powertools' settings), as JSON: 980 bytes at their longest, with a
# 16-character deployment name, a 14-character region (ap-southeast-3) and a 63-character bucket
STACK_SETTINGS_BYTES = 1024


# -- the deployment ----------------------------------------------------------------------------
class Deployment(_Strict):
    name: str                             # dev, prod: in every resource's name
    retain_data: bool                     # true: tables, buckets and logs outlive the stack
    keep_history_days: Annotated[int, Field(ge=1, le=3650)] = 90   # a finished job is deleted this long after its end
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
    def _consistent(self) -> Deployment:
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
        gpus = sum(pool.max_gpus for pool in self.pools)
        if gpus > MAX_GPUS:
            raise _at(("pools",), f"hold {gpus:,} GPUs together (max_gpus), at most {MAX_GPUS:,} in one deployment; "
                                  f"split the pools across deployments")
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
        if len(member_of) > MAX_ALL_MEMBERS:
            raise _at(("teams",), f"list {len(member_of):,} members together, at most {MAX_ALL_MEMBERS} in one "
                                  f"deployment (each goes into the stack's template, which CloudFormation limits "
                                  f"to 1 MB): one pattern with * covers many")
        return self

    @model_validator(mode="after")
    def _fits_a_function(self) -> Deployment:
        # Lambda refuses a function whose environment passes 4 KB as JSON; the stack adds table names,
        # queue URLs, bucket and log group names, and Powertools' settings to these. Counted as if one
        # function read them all.
        settings = self.function_settings()
        taken = environment_bytes(settings)
        if taken > LAMBDA_ENVIRONMENT_BYTES - STACK_SETTINGS_BYTES:
            sizes = {k: environment_bytes({k: v}) - 2 for k, v in settings.items()}   # less the braces
            biggest = ", ".join(f"{k} {n:,}" for k, n in sorted(sizes.items(), key=lambda kv: -kv[1])[:3])
            raise ValueError(f"the functions' settings from this file take {taken:,} bytes as Lambda counts them "
                             f"({biggest}); Lambda allows {LAMBDA_ENVIRONMENT_BYTES:,} for a function's whole "
                             f"environment, {STACK_SETTINGS_BYTES:,} of which the stack's names and URLs need: list "
                             f"fewer access patterns (one with * covers many), images or pools")
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
                "GQA_KEEP_HISTORY_DAYS": str(self.keep_history_days),
                "GQA_TRIGGER_BUCKETS": self.triggers.buckets_json()}


def environment_bytes(variables: dict[str, str]) -> int:
    """A function's environment as Lambda measures it against its 4 KB: the map as compact JSON."""
    return len(json.dumps(variables, separators=(",", ":")).encode())


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
        raise spec_error(exc, lines or {}, source, raw, FIELDS) from None


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
