"""A job's history on DynamoDB, and the size a job item may reach.

DynamoDB refuses an item over 400 KB, and then every transaction that
touches the job. So the job item keeps only its most recent transitions;
older ones move to history items of their own:

- The job item holds at most MOST transitions. A write that would leave more
  moves the oldest ones out, keeping KEEP, in the same transaction as the
  transition itself, so the move is as atomic and as guarded (by the job's
  revision) as the transition. `history_moved` in the job item counts the
  transitions moved so far: the index of the first one still in the item.
- A history item: partition `grp` "<job id>#history", sort `id` the index of
  its first transition, zero-padded, so one Query returns them in order. No
  group is spelt that way (groups are digits) and a history item carries
  none of the index attributes (state, team, live, seq): resolve(group),
  list() and a scheduling pass never read one. Its Put is conditional on the
  key being new, so an index is moved once: a replayed write fails instead
  of writing a chunk twice.
- A reason is cut to MAX_REASON_BYTES (in the history and in `reason` and
  `kill_reason`), and what a submission brings (spec, environments, the
  other attributes) may take at most MAX_FIXED_BYTES, refused at submission.

So a job item takes at most ITEM_CEILING bytes whatever happens to the job:
about 300 KiB, a quarter below DynamoDB's limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from ...models.job import JobState, Transition
from . import tables as t

KEEP = 20                       # transitions a job item keeps after a move: the recent ones services look at
MOST = 40                       # transitions a job item holds at most (a move every KEEP transitions)
CHUNK = 64                      # transitions one history item holds at most (about 70 KB)
MAX_REASON_BYTES = 1024         # a reason as stored: real ones are a line; a cut one ends in "..."
MAX_FIXED_BYTES = 256 * 1024    # the job item without history and reasons: the intake message's ceiling
TRANSITION_BYTES = 64           # one transition in the item without its reason: names, state, time
ITEM_CEILING = MAX_FIXED_BYTES + (MOST + 2) * (MAX_REASON_BYTES + TRANSITION_BYTES)

MOVED = "history_moved"         # job item: transitions in history items (the first index still in the item)
TRANSITIONS = "transitions"     # history item: its transitions, oldest first
_SUFFIX = "#history"
_CUT = "..."


def cut(reason: str) -> str:
    """A reason within MAX_REASON_BYTES of UTF-8 (cut on a character boundary)."""
    data = reason.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_REASON_BYTES:
        return reason
    return data[:MAX_REASON_BYTES - len(_CUT)].decode("utf-8", "ignore") + _CUT


def encode(transitions: Iterable[Transition]) -> list[dict[str, Any]]:
    return [{"state": h.state.value, "at": Decimal(repr(float(h.at))), "reason": cut(h.reason)} for h in transitions]


def decode(raw: Iterable[dict[str, Any]]) -> tuple[Transition, ...]:
    return tuple(Transition(JobState(h["state"]), float(h["at"]), h["reason"]) for h in raw)


def partition(job_id: str) -> str:
    return job_id + _SUFFIX


def job_of(key: dict[str, Any]) -> str:
    """The job a jobs-table key belongs to: a job's own, or one of its history items'."""
    group = str(key[t.GROUP])
    return group.removesuffix(_SUFFIX) if group.endswith(_SUFFIX) else str(key[t.ID])


def history_key(job_id: str, first: int) -> dict[str, str]:
    return {t.GROUP: partition(job_id), t.ID: f"{first:012d}"}


def split(moved: int, history: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]], list[tuple[int, list]]]:
    """The item's history as it will be stored: (transitions moved in all,
    the ones the item keeps, the history items to write as (first index,
    transitions)). Nothing moves while the item holds at most MOST."""
    if len(history) <= MOST:
        return moved, history, []
    out, kept = history[:-KEEP], history[-KEEP:]
    chunks = [(moved + start, out[start:start + CHUNK]) for start in range(0, len(out), CHUNK)]
    return moved + len(out), kept, chunks


def fixed_bytes(item: dict[str, Any]) -> int:
    """What a job item's attributes take, but for the history and reasons (DynamoDB's rules, roughly)."""
    return sum(len(k.encode()) + value_bytes(v) for k, v in item.items()
               if k not in (t.HISTORY, "reason", "kill_reason"))


def item_bytes(item: dict[str, Any]) -> int:
    """A plain item's size as DynamoDB counts it: names and values in UTF-8,
    numbers up to 21 bytes, 3 bytes and 1 per element for lists and maps."""
    return sum(len(k.encode()) + value_bytes(v) for k, v in item.items())


def value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, (int, float, Decimal)):
        return min(21, len(str(value)) // 2 + 2)
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, dict):
        return 3 + sum(1 + len(k.encode()) + value_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return 3 + sum(1 + value_bytes(v) for v in value)
    raise TypeError(f"no DynamoDB size for {type(value).__name__}")
