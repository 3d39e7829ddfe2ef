"""A trigger: "when objects land under s3://BUCKET/PREFIX, submit this job".

Pure data and rules: which object keys a trigger matches, what a valid
trigger is, where a deployment lets triggers watch (TriggerPlaces), and its
wire form (the API and the store both use it). The debounce of a burst of
objects into one job is in burst.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .units import format_duration, parse_duration

DEFAULT_DEBOUNCE = 120          # seconds: a burst of uploads within two minutes is one job
# A burst is closed by a timer message delayed by the window: SQS delays a message by 15 minutes at most.
MAX_DEBOUNCE = 900
MIN_DEBOUNCE = 1
# Manifests of large bursts are written under this root (burst.py). A trigger never matches a key under
# it, so a trigger on the manifest bucket cannot set itself off with its own manifests.
MANIFEST_ROOT = "gqa-trigger-manifests/"
MAX_KEY_BYTES = 1024            # S3's longest object key
# S3's bucket naming rules: 3-63 lowercase letters, digits, dots and hyphens, starting and ending alphanumeric
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_TRIGGER_ID = re.compile(r"^tr-[0-9a-f]{4,32}$")


@dataclass(frozen=True)
class Trigger:
    id: str
    bucket: str
    prefix: str
    spec_json: str          # the job to submit, as validated at add time
    owner: str              # who added it: the jobs it submits are theirs
    debounce: int           # seconds from a burst's first object until it closes
    created_at: float
    suffix: str | None = None
    # the owner's IAM ARN as the API verified it: their rights are judged again from it at each burst;
    # "" on a trigger added before it was kept, whose owner is then judged by the name alone
    owner_arn: str = ""

    @property
    def code(self) -> str | None:
        """The code bundle its job runs (`code: sha256:...`), or None: the image holds the code."""
        try:
            value = json.loads(self.spec_json).get("code")
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None

    def matches(self, bucket: str, key: str) -> bool:
        return (bucket == self.bucket and key.startswith(self.prefix)
                and (self.suffix is None or key.endswith(self.suffix))
                and not key.startswith(MANIFEST_ROOT))

    def describe(self) -> str:
        """s3://bucket/prefix*suffix, as people read a pattern."""
        return f"s3://{self.bucket}/{self.prefix}*{self.suffix or ''}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "bucket": self.bucket, "prefix": self.prefix, "suffix": self.suffix,
                "spec_json": self.spec_json, "owner": self.owner, "debounce": self.debounce,
                "created_at": self.created_at, "owner_arn": self.owner_arn}

    @classmethod
    def from_dict(cls, data: Any) -> "Trigger":
        """The wire form back into a Trigger; SpecError names the first bad field."""
        if not isinstance(data, dict):
            raise SpecError("a trigger must be a JSON object", source="trigger")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise SpecError(f"unknown field {unknown[0]!r}", source="trigger")
        for name in ("id", "bucket", "prefix", "spec_json", "owner"):
            if not isinstance(data.get(name), str):
                raise SpecError(f"{name} must be a string", source="trigger")
        suffix = data.get("suffix")
        if suffix is not None and not isinstance(suffix, str):
            raise SpecError("suffix must be a string or null", source="trigger")
        owner_arn = data.get("owner_arn", "")
        if not isinstance(owner_arn, str) or (owner_arn and not owner_arn.startswith("arn:")):
            raise SpecError("owner_arn must be an IAM ARN, or empty", source="trigger")
        debounce, created_at = data.get("debounce"), data.get("created_at")
        if isinstance(debounce, bool) or not isinstance(debounce, int):
            raise SpecError("debounce must be a whole number of seconds", source="trigger")
        if isinstance(created_at, bool) or not isinstance(created_at, (int, float)):
            raise SpecError("created_at must be a number", source="trigger")
        if not _TRIGGER_ID.match(data["id"]):
            raise SpecError(f"{data['id']!r} is not a trigger id (tr-...)", source="trigger")
        check_pattern(data["bucket"], data["prefix"], suffix)
        check_debounce(debounce)
        if not data["owner"]:
            raise SpecError("owner must not be empty", source="trigger")
        return cls(id=data["id"], bucket=data["bucket"], prefix=data["prefix"], spec_json=data["spec_json"],
                   owner=data["owner"], debounce=debounce, created_at=float(created_at), suffix=suffix,
                   owner_arn=owner_arn)


@dataclass(frozen=True)
class S3Object:
    """One "Object Created" event. `sequencer` (and `version`, in a versioned
    bucket) tell two writes of one key apart; a redelivered event repeats them."""

    bucket: str
    key: str
    sequencer: str = ""
    version: str | None = None
    size: int | None = None
    etag: str = ""

    @property
    def token(self) -> str:
        """What makes this event itself: the same write delivered twice has the same token."""
        return "\n".join((self.bucket, self.key, self.version or "", self.sequencer))


def is_trigger_id(text: str) -> bool:
    return bool(_TRIGGER_ID.match(text))


def check_pattern(bucket: str, prefix: str, suffix: str | None) -> None:
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise SpecError(f"{bucket!r} is not an S3 bucket name: 3-63 lowercase letters, digits, '.' or '-'")
    if len(prefix.encode()) > MAX_KEY_BYTES:
        raise SpecError(f"the prefix is {len(prefix.encode())} bytes; an S3 key has at most {MAX_KEY_BYTES}")
    if prefix.startswith(MANIFEST_ROOT):
        raise SpecError(f"keys under {MANIFEST_ROOT} are gqa's own trigger manifests; choose another prefix")
    if suffix is not None and (not suffix or len(suffix.encode()) > MAX_KEY_BYTES):
        raise SpecError(f"the suffix must be 1 to {MAX_KEY_BYTES} bytes (leave it out to match any key)")


def check_debounce(seconds: int) -> None:
    if not MIN_DEBOUNCE <= seconds <= MAX_DEBOUNCE:
        raise SpecError(f"the debounce window must be {MIN_DEBOUNCE}s to {format_duration(MAX_DEBOUNCE)} "
                        f"(the longest delay of an SQS message), got {format_duration(seconds)}")


def parse_debounce(text: str | int | None) -> int:
    """`2m`, `90s`, `15m`, or seconds as a number; None -> the default."""
    if text is None:
        return DEFAULT_DEBOUNCE
    seconds = parse_duration(text, bare_unit="s")
    check_debounce(seconds)
    return seconds


# -- where a deployment lets triggers watch -----------------------------------------------------------
@dataclass(frozen=True)
class TriggerBucket:
    """A bucket the deployment sends the new objects of to gqa, and the
    prefixes triggers may watch in it (none: anywhere in it)."""

    name: str
    prefixes: tuple[str, ...] = ()

    def allows(self, prefix: str) -> bool:
        return not self.prefixes or any(prefix.startswith(p) for p in self.prefixes)


@dataclass(frozen=True)
class TriggerPlaces:
    """Where triggers may watch in one deployment: under the prefixes of the
    buckets its deployment file lists (triggers.buckets, the only buckets
    whose events reach gqa), and never in a bucket gqa writes to itself: a
    trigger on the checkpoint bucket would start a job at every checkpoint,
    each writing more checkpoints, without end.

    The api function checks a new trigger against it; the trigger function
    checks every matching trigger again at each object, so a trigger added
    before the deployment file changed stops firing when it is no longer allowed."""

    buckets: tuple[TriggerBucket, ...] = ()
    own: tuple[tuple[str, str], ...] = ()       # (bucket, what gqa writes there)

    @classmethod
    def of(cls, buckets: Iterable[TriggerBucket], *, checkpoint_bucket: str | None = None,
           manifest_bucket: str | None = None) -> "TriggerPlaces":
        own: dict[str, list[str]] = {}
        for bucket, what in ((checkpoint_bucket, "the jobs' checkpoints"),
                             (manifest_bucket, "the trigger manifests")):
            if bucket:
                own.setdefault(bucket, []).append(what)
        return cls(tuple(buckets), tuple((name, " and ".join(whats)) for name, whats in own.items()))

    def refusal(self, bucket: str, prefix: str) -> str | None:
        """Why a trigger may not watch s3://bucket/prefix here; None if it may."""
        for name, what in self.own:
            if bucket == name:
                return (f"s3://{bucket} holds {what}, which gqa's jobs write: a trigger there would start a job "
                        f"for each of them, without end; watch the bucket your data lands in")
        if prefix.startswith(MANIFEST_ROOT):
            return f"keys under {MANIFEST_ROOT} are gqa's own trigger manifests; choose another prefix"
        if not self.buckets:
            return ("this deployment lists no trigger buckets (triggers.buckets in its deployment file), so no "
                    "object event reaches gqa: no trigger can be added until one is listed and deployed")
        allowed = next((b for b in self.buckets if b.name == bucket), None)
        if allowed is None:
            names = ", ".join(b.name for b in self.buckets)
            return (f"{bucket!r} is not one of this deployment's {len(self.buckets)} trigger bucket(s) ({names}): "
                    f"its new objects send no events to gqa (triggers.buckets in the deployment file lists them)")
        if not allowed.allows(prefix):
            listed = ", ".join(repr(p) for p in allowed.prefixes)
            return (f"in {bucket}, triggers may watch only under {len(allowed.prefixes)} prefix(es): {listed}; "
                    f"{prefix!r} is not under one")
        return None

    def check(self, bucket: str, prefix: str) -> None:
        """SpecError saying why, where a trigger may not watch s3://bucket/prefix."""
        problem = self.refusal(bucket, prefix)
        if problem:
            raise SpecError(problem, source="trigger")


def trigger_buckets_from_json(raw: Any) -> tuple[TriggerBucket, ...]:
    """GQA_TRIGGER_BUCKETS, parsed: a list of bucket names or {"name": ..., "prefixes": [...]}.
    ValueError names the first bad entry."""
    if not isinstance(raw, list):
        raise ValueError(f"must be a JSON list of buckets, got {type(raw).__name__}")
    out = []
    for i, entry in enumerate(raw):
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict) or set(entry) - {"name", "prefixes"}:
            raise ValueError(f"entry {i} must be a bucket name or {{\"name\": ..., \"prefixes\": [...]}}")
        name, prefixes = entry.get("name"), entry.get("prefixes", [])
        if not isinstance(name, str) or not _BUCKET.match(name):
            raise ValueError(f"entry {i}: {name!r} is not an S3 bucket name")
        # left out: anywhere in the bucket; an empty list would allow nowhere, which no file can say
        if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes) or \
                ("prefixes" in entry and not prefixes):
            raise ValueError(f"entry {i}: prefixes must be a non-empty list of strings, or left out")
        out.append(TriggerBucket(name, tuple(prefixes)))
    return tuple(out)
