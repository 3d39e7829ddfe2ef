"""The queue as `gqa queue` prints it, as one compact JSON document: what
the local daemon keeps after its passes (the queue's home holds it for the
owner's CLI) and what the CLI renders, whichever way the view was had.

Only absolute times travel (submitted, started, ETA, back in the queue at),
so ages, ETAs "in 5m" and time left are counted when the listing is printed,
and a listing computed a few seconds ago reads right. A job travels without
its spec and environment, as in wire.py. Reading a listing imports nothing
but the standard library: `gqa queue` on a kept view loads no scheduling
code and parses no spec.

Decoding is plain `json`: `current()` checks the stamp; the rows are dicts
whose keys are the `FORMAT` below."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..services.queries import QueueView

# bump when a key below changes meaning: a listing of another format is not read, it is computed again
FORMAT = 1
# service last: a view kept before time slicing lists the others only (factors_of reads what it has)
FACTORS = ("fair_share", "age", "size", "duration", "nice", "score", "service")
WEIGHTS = ("fair_share", "age", "size", "duration")


def listing_of(view: QueueView) -> dict[str, Any]:
    """The document for `view` (QueryService.queue's answer), unstamped:
    pending rows in the view's order, then running ones."""
    pending = []
    for e in view.pending:
        j = e.job
        row = {"position": e.position, "id": j.id, "group": j.group, "index": j.array_index, "name": j.name,
               "team": j.team, "owner": j.owner, "tier": j.tier, "gpus": j.gpus, "gpu_type": j.gpu_type,
               "state": j.state.value, "status": j.status.value, "submitted_at": j.submitted_at,
               "time_limit": j.attempt_wall_time, "eta": e.eta, "reason": e.reason,
               "factors": factors_text(e.factors)}
        if e.position is None and j.state.value == "RETRY_WAIT" and j.not_before is not None:
            # "back in the queue in 4m" is told at print time from when it is
            row.update(reason=j.reason, back_at=j.not_before)
        pending.append(row)
    running = [{"id": j.id, "group": j.group, "name": j.name, "team": j.team, "owner": j.owner,
                "gpus": list(j.assigned), "started_at": j.started_at, "attempt": j.attempts, "state": j.state.value,
                "status": j.status.value, "reason": j.reason, "time_limit": j.attempt_wall_time}
               for j in view.running]
    weights = view.weights
    return {"format": FORMAT, "total_gpus": view.total_gpus, "free_gpus": view.free_gpus,
            "outside_gpus": view.outside_gpus,
            "weights": {w: getattr(weights, w) for w in WEIGHTS} if weights is not None else None,
            "pending": pending, "running": running}


def factors_text(factors: Any) -> str | None:
    """A job's priority factors as one string, read back exactly by `factors_of`: only
    --explain and -o json read them, so most listings never parse 60,000 floats."""
    return None if factors is None else " ".join(repr(float(getattr(factors, f))) for f in FACTORS)


def factors_of(text: str | None) -> dict[str, float] | None:
    return None if text is None else dict(zip(FACTORS, map(float, text.split())))


def stamped(listing: dict[str, Any], *, queue_id: str, revision: int, at: float,
            until: float | None = None) -> dict[str, Any]:
    """The listing with what it was computed from: the queue, the store's revision, the
    time; `until`: when time alone changes it (a --begin reached), if ever."""
    return {**listing, "queue_id": queue_id, "revision": revision, "at": at, "until": until}


def changes_at(view: QueueView, now: float) -> float | None:
    """The first time the view changes with no write to the store: a pending job's
    --begin time passing (its reason, and whether it may start, change then)."""
    return min((e.job.begin for e in view.pending if e.job.begin is not None and e.job.begin > now), default=None)


def current(document: Any, *, queue_id: str, revision: int, now: float) -> bool:
    """True for a listing of this format, of this queue, computed at this revision,
    whose time has not run out."""
    if not (isinstance(document, dict) and document.get("format") == FORMAT
            and document.get("queue_id") == queue_id and document.get("revision") == revision
            and isinstance(document.get("pending"), list) and isinstance(document.get("running"), list)):
        return False
    until = document.get("until")
    return until is None or now < until


def of_group(listing: dict[str, Any], group: str | None) -> dict[str, Any]:
    """Only this array or sweep, or this one job (an id), as QueryService.queue(group=...)."""
    if group is None:
        return listing
    return {**listing, "pending": [r for r in listing["pending"] if group in (r["group"], r["id"])],
            "running": [r for r in listing["running"] if group in (r["group"], r["id"])]}
