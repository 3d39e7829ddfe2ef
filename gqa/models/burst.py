"""Debouncing: a burst of objects landing under a trigger becomes one job.

A burst opens with the first matching object and closes `debounce` seconds
later; objects arriving in between join it, objects after it closes open the
next one. The record of a burst lists its keys up to a cap (one DynamoDB item
stays small, and every write of an item costs its size), and counts the rest.

Pure rules only: what an arriving object does to the open burst (plan), and
what the job submitted for a closed burst sees in its environment."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from .trigger import MANIFEST_ROOT, Trigger

RECORD_KEYS = 1000              # keys listed in a burst's record; later ones are only counted
RECORD_KEY_BYTES = 64 * 1024    # ...and at most this much key text
# Keys passed inline in GQA_TRIGGER_KEYS. Batch takes at most 30 KiB per SubmitJob (command, environment,
# tags together); past this the full list goes to a manifest object and only the first keys stay inline.
INLINE_KEY_BYTES = 4 * 1024
# A burst still open this long after it should have closed lost its timer (a message that went to the
# dead-letter queue): the next object closes it before opening its own.
OVERDUE_AFTER = 300
# How long an event is remembered as counted: longer than EventBridge retries a delivery (24 h) and Lambda
# retries an asynchronous invocation (6 h).
REMEMBER_EVENTS = 2 * 86400
# How long a closed burst is remembered: longer than its timer message can live on the queue and its
# dead-letter queue (4 + 14 days), so a redriven timer finds it submitted.
REMEMBER_BURSTS = 20 * 86400

ENV_ID, ENV_BUCKET, ENV_KEYS, ENV_COUNT, ENV_MANIFEST = (
    "GQA_TRIGGER_ID", "GQA_TRIGGER_BUCKET", "GQA_TRIGGER_KEYS", "GQA_TRIGGER_COUNT", "GQA_TRIGGER_MANIFEST")


class StepKind(StrEnum):
    OPEN = "open"                    # no burst is open: this object opens one
    APPEND = "append"                # joins the open burst, its key listed
    ABSORB = "absorb"                # its key is already listed (an overwrite): nothing to add
    OVERFLOW = "overflow"            # joins the open burst, counted but not listed (the record is full)
    CLOSE_OVERDUE = "close-overdue"  # the open burst lost its timer: close it first, then plan again


@dataclass(frozen=True)
class Burst:
    trigger_id: str
    id: str
    opened_at: float
    closes_at: float
    keys: tuple[str, ...] = ()
    key_bytes: int = 0      # UTF-8 bytes of `keys`
    more: int = 0           # objects past the record's cap

    @property
    def count(self) -> int:
        return len(self.keys) + self.more

    def has_room(self, key: str) -> bool:
        return len(self.keys) < RECORD_KEYS and self.key_bytes + key_size(key) <= RECORD_KEY_BYTES

    def with_object(self, kind: StepKind, key: str) -> "Burst":
        """The burst after an object was counted by a step of `kind`."""
        if kind is StepKind.APPEND:
            return replace(self, keys=self.keys + (key,), key_bytes=self.key_bytes + key_size(key))
        if kind is StepKind.OVERFLOW:
            return replace(self, more=self.more + 1)
        return self


@dataclass(frozen=True)
class ClosedBurst:
    """A burst after its window ended; `submitted` once its job is on the intake queue."""

    burst: Burst
    closed_at: float
    submitted: bool = False
    jobs: tuple[str, ...] = ()
    dropped: str | None = None   # why nothing was submitted (its trigger was removed)


def key_size(key: str) -> int:
    return len(key.encode())


def plan(burst: Burst | None, key: str, now: float) -> StepKind:
    """What an object with `key`, arriving at `now`, does given the open burst (None: none is open)."""
    if burst is None:
        return StepKind.OPEN
    if now >= burst.closes_at + OVERDUE_AFTER:
        return StepKind.CLOSE_OVERDUE
    if key in burst.keys:
        return StepKind.ABSORB
    if burst.has_room(key):
        return StepKind.APPEND
    return StepKind.OVERFLOW


def open_burst(trigger: Trigger, burst_id: str, key: str, now: float) -> Burst:
    return Burst(trigger_id=trigger.id, id=burst_id, opened_at=now, closes_at=now + trigger.debounce,
                 keys=(key,), key_bytes=key_size(key))


# -- what the submitted job sees ---------------------------------------------------------------

def inline_keys(keys: tuple[str, ...], budget: int = INLINE_KEY_BYTES) -> tuple[str, ...]:
    """The longest run of first keys whose newline-separated text fits in `budget` bytes."""
    used = 0
    for n, key in enumerate(keys):
        used += key_size(key) + (1 if n else 0)
        if used > budget:
            return keys[:n]
    return keys


def needs_manifest(burst: Burst, budget: int = INLINE_KEY_BYTES) -> bool:
    return len(inline_keys(burst.keys, budget)) < len(burst.keys)


def manifest_name(trigger_id: str, burst_id: str) -> str:
    return f"{MANIFEST_ROOT}{trigger_id}/{burst_id}.txt"


def manifest_text(burst: Burst) -> str:
    return "".join(f"{key}\n" for key in burst.keys)


def job_environment(trigger: Trigger, burst: Burst, manifest_uri: str | None = None,
                    budget: int = INLINE_KEY_BYTES) -> dict[str, str]:
    """GQA_TRIGGER_* for the job of a closed burst. GQA_TRIGGER_COUNT counts every object; when it is
    more than the keys listed (inline, or in the manifest), the record was full: list the prefix."""
    env = {ENV_ID: trigger.id, ENV_BUCKET: trigger.bucket,
           ENV_KEYS: "\n".join(inline_keys(burst.keys, budget)), ENV_COUNT: str(burst.count)}
    if manifest_uri is not None:
        env[ENV_MANIFEST] = manifest_uri
    return env

