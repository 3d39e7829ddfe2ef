"""Triggers' seams: their store, the timer that closes a burst, and manifests."""

from __future__ import annotations

from typing import Protocol

from ..models.burst import Burst, ClosedBurst, StepKind
from ..models.trigger import Trigger
from .intake import Submission

# `list` is also a method of TriggerStore: annotations below it name the builtin this way
List = list


class TriggerStore(Protocol):
    """Triggers and their bursts (the settings table on AWS). Every burst write
    is guarded on the burst the caller read, and counts an event at most once."""

    def add(self, trigger: Trigger) -> None:
        """Conflict if a trigger has this id."""

    def get(self, trigger_id: str) -> Trigger:
        """NotFound if there is none."""

    def list(self) -> list[Trigger]: ...

    def remove(self, trigger_id: str) -> None:
        """Remove the trigger and its open burst (its timer then finds nothing); NotFound if there is none."""

    def open_burst(self, trigger_id: str) -> Burst | None:
        """The trigger's open burst, read consistently. The AWS store returns the burst's id and
        window with `keys` empty: its keys are listed when it closes."""

    def count(self, kind: StepKind, burst: Burst, key: str, token: str, expires: float) -> bool:
        """Record one object as `kind` decided on `burst` (for OPEN, the burst to open; otherwise the
        one read). False if the event `token` was counted before (a redelivery). Conflict if the
        burst is no longer what the caller read: read it again and plan again."""

    def close(self, trigger_id: str, burst_id: str, now: float, expires: float) -> ClosedBurst | None:
        """Close the open burst `burst_id`, exactly once however often it is asked; the closed burst
        (submitted or not), or None if no burst of that id was ever opened or it was removed."""

    def hold_submission(self, trigger_id: str, burst_id: str, submission: Submission) -> Submission:
        """Keep the closed burst's submission (with its reserved job ids) before it is sent; if one is
        kept already, that one is returned and `submission` is not kept."""

    def held_submission(self, trigger_id: str, burst_id: str) -> Submission | None: ...

    def mark_submitted(self, trigger_id: str, burst_id: str, jobs: List[str], dropped: str | None = None) -> None:
        """Record that the closed burst's job was submitted (or, with `dropped`, never will be)."""


class BurstTimer(Protocol):
    """Closes a burst when its window ends (a delayed SQS message on AWS)."""

    def schedule(self, trigger_id: str, burst_id: str, delay: int) -> None: ...


class Manifests(Protocol):
    """Where the key list of a large burst is written for its job."""

    def write(self, name: str, text: str) -> str:
        """Store `text` under `name` (overwriting the same text is harmless); returns its URI."""


class TriggerCode(Protocol):
    """A trigger's copy of its job's code bundle, kept while the trigger exists (the bundles jobs
    fetch expire: gqa.models.code), from which each burst's job gets its code."""

    def keep(self, trigger_id: str, digest: str) -> None:
        """Copy the stored bundle `digest` to the trigger's own; NotFound if it is not stored."""

    def ready(self, trigger_id: str, digest: str) -> str:
        """Make the bundle stored where jobs fetch it, for as long as a submission's is (copied from
        the trigger's copy when gone or near its expiry; a trigger without a copy gets one); what
        was done. NotFound if neither holds it."""

    def release(self, trigger_id: str, digest: str) -> None:
        """Delete the trigger's copy (nothing if there is none)."""
