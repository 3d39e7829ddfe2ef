"""The dispatcher's wake-up messages and what they carry.

A writer that changed jobs a pass must see (a settlement frees GPUs, a
cancel, a budget's release) names them in its wake-up, each with the item
it wrote as the changes index projects it (tables.PASS_ATTRIBUTES) where it
has it: the pass merges those without reading them, and reads the others
from the table, strongly consistent, so a wake-up sent right after a write
never finds nothing because the index has not caught up
(DynamoDBStore.pass_reads). A wake-up that names none (`{"wake": true}`, as
admission sends) means "something changed": the pass reads the index from
its watermark. An SQS message is at most 256 KiB: a wake-up carries items
up to ITEM_BYTES of them, names at most MOST_NAMED jobs, and names none past
that (the index is read instead).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from . import items as it
from .tables import REVISION
from .sqs_intake import SqsIntake, is_fifo

MOST_NAMED = 1000
ITEM_BYTES = 128 * 1024

Named = dict[str, "dict[str, Any] | None"]   # job id -> its projected item as written (None: read it)


def body(jobs: Iterable[str] = (), written: Mapping[str, dict[str, Any]] | None = None) -> str:
    named = list(dict.fromkeys(jobs))
    if not named or len(named) > MOST_NAMED:
        return json.dumps({"wake": True})
    carried: dict[str, Any] = {}
    size = 0
    for job_id in named:
        item = (written or {}).get(job_id)
        if item is None:
            continue
        wire = it.dump(item)
        size += len(json.dumps(wire))
        if size > ITEM_BYTES:
            break
        carried[job_id] = wire
    return json.dumps({"wake": True, "jobs": named, **({"items": carried} if carried else {})},
                      separators=(",", ":"))


def send(intake: SqsIntake, jobs: Iterable[str] = (), written: Mapping[str, dict[str, Any]] | None = None) -> None:
    """One wake-up naming `jobs` (with their items as `written`, where given) on the intake's wake-up queue."""
    kwargs: dict[str, Any] = {"QueueUrl": intake.wakeup_url, "MessageBody": body(jobs, written)}
    if is_fifo(intake.wakeup_url):
        # never deduplicated: a wake-up dropped as a duplicate could leave a new job waiting
        kwargs.update(MessageGroupId="dispatch", MessageDeduplicationId=uuid.uuid4().hex)
    intake.call("SendMessage", **kwargs)


class WrittenItems(Protocol):
    """The store that has just written the jobs a wake-up names (DynamoDBStore.wakeup_items)."""

    def wakeup_items(self, job_ids: Iterable[str]) -> dict[str, dict[str, Any]]: ...


class WakeDispatcher:
    """The Waker port over the dispatcher's wake-up queue. `store`: the store
    whose writes the wake-up follows, so what it just wrote rides along (None:
    the wake-up names the jobs only). `on_error`: where the change a wake-up
    follows is already stored and a failed wake-up is only late (the
    dispatcher's schedule carries the change out at its next tick), it is
    called inside the handler, and the error goes no further; None: it raises."""

    def __init__(self, intake: SqsIntake, store: WrittenItems | None = None, *,
                 on_error: Callable[[], None] | None = None):
        self.intake, self.store, self.on_error = intake, store, on_error

    def wake(self, jobs: Iterable[str] = ()) -> None:
        jobs = list(jobs)
        try:
            send(self.intake, jobs, self.store.wakeup_items(jobs) if self.store else None)
        except Exception:
            if self.on_error is None:
                raise
            self.on_error()


def named(records: Iterable[dict[str, Any]]) -> Named | None:
    """The jobs a batch of wake-up records names, with the items they carry;
    None when any one names none (or cannot be read): what changed is unknown."""
    out: Named = {}
    for record in records:
        try:
            message = json.loads(record.get("body") or "{}")
            jobs, carried = message.get("jobs"), message.get("items") or {}
            if not isinstance(jobs, list) or not jobs or not all(isinstance(j, str) for j in jobs):
                return None
            for job_id in jobs:
                item = it.load(carried[job_id]) if job_id in carried else None
                if job_id not in out:
                    out[job_id] = item
                elif item is None or out[job_id] is None:
                    out[job_id] = None   # one wake-up named it without its item: read it
                elif int(item.get(REVISION, 0)) >= int(out[job_id].get(REVISION, 0)):   # type: ignore[union-attr]
                    out[job_id] = item
        except (ValueError, AttributeError, TypeError, KeyError):
            return None
    return out

