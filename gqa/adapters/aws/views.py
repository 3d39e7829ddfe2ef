"""What the DynamoDB store keeps between calls so as to call DynamoDB less,
and for how long. Each saves calls only where an old answer is harmless:

- Expiring: a read reused for `ttl` seconds (settings, runtime samples). A
  store's own writes clear it; another process's writes are seen within ttl.
  Nothing guarded is decided from it: quotas, prices and estimates only.
- PassView: the reads of one scheduling pass (live jobs, the ledger,
  settings), each read at most once while the pass lasts and kept up to date
  with the store's own writes. A pass plans from one snapshot anyway.
- QueueView: the live jobs as the changes index holds them (tables.py),
  kept by the dispatch function's container from pass to pass. A pass
  reads only what changed since the previous one (from a watermark less
  CHANGE_MARGIN), and all of it at a cold start and, by a pass that reads
  the index anyway, every RESYNC_EVERY seconds; the jobs a wake-up names
  are read from the table itself. Never
  the base of a write: a pass reads the whole items of the jobs it changes.
- KnownItems: job items as this store last read or wrote them, for a few
  seconds. apply() plans its first try from them instead of reading again:
  its writes are guarded on the item's revision, so a stale item makes the
  write fail and the change is planned again from a fresh read. Never an
  answer to a caller, only a guess that the guard checks.

Time comes from `monotonic`, a module attribute so that a test can make the
caches follow a virtual clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Item = dict[str, Any]

monotonic: Callable[[], float] = time.monotonic


def now() -> float:
    return monotonic()


class Expiring(Generic[T]):
    """One value, read again once it is older than `ttl` seconds (0: every time)."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self._value: tuple[float, T] | None = None

    def get(self, read: Callable[[], T]) -> T:
        if self._value is not None and self.ttl > 0 and now() - self._value[0] < self.ttl:
            return self._value[1]
        value = read()
        self._value = (now(), value)
        return value

    def clear(self) -> None:
        self._value = None


@dataclass
class PassView:
    """One pass's reads: None until first asked for."""

    live: dict[str, Item] | None = None          # job id -> item, the live index
    ordered: list[Item] | None = None            # `live` in submission order (None: not sorted since it changed)
    ledger: list[Item] | None = None             # the ledger partition
    settings: dict[str, Item] | None = None      # sk -> item, the settings partition
    samples: dict[int, Any] = field(default_factory=dict)


# How far back a read of what changed reaches before the previous read began. A job's `changed`
# is stamped when its write is planned: the write lands on the index after the writer's retries
# (Retrying: under 10 s), the index's propagation (usually well under a second) and the writers'
# clock skew (NTP: milliseconds). A minute covers those with room; re-reading a minute of changes
# costs what changed in that minute.
CHANGE_MARGIN = 60.0
# A whole read now and then catches what a margin missed (a writer paused for longer) and drops
# jobs that left the live states by another function's write no wake-up named (they leave the
# index, so a read of what changed never sees them go: a lost wake-up leaves their GPUs looking
# held until then). Made by a scheduled pass, never one a wake-up named its jobs for.
RESYNC_EVERY = 300.0


@dataclass
class QueueView:
    """The live jobs by id (projected items), and when they were read."""

    jobs: dict[str, Item] = field(default_factory=dict)
    watermark: float | None = None       # wall-clock start of the last index read (None: never read)
    resynced: float | None = None        # views.now() of the last whole read
    # the jobs whose item was replaced or dropped since the scheduling records were last brought up
    # to date (listing.LiveListing); None: unknown, after a whole read. An item is replaced when its
    # job changes, never edited in place
    dirty: set[str] | None = None

    def put(self, job_id: str, item: Item) -> None:
        self.jobs[job_id] = item
        if self.dirty is not None:
            self.dirty.add(job_id)

    def drop(self, job_id: str) -> None:
        if self.jobs.pop(job_id, None) is not None and self.dirty is not None:
            self.dirty.add(job_id)

    def whole(self, jobs: dict[str, Item]) -> None:
        self.jobs, self.dirty = jobs, None

    def taken_dirty(self) -> set[str] | None:
        """The jobs changed since the last call (None: all may have), and a fresh count from now."""
        dirty, self.dirty = self.dirty, set()
        return dirty

    def stale(self) -> bool:
        return self.watermark is None or self.resynced is None or now() - self.resynced >= RESYNC_EVERY


class KnownItems:
    """Job items by id, each trusted for `ttl` seconds after it was seen."""

    def __init__(self, ttl: float, *, most: int = 2000):
        self.ttl = ttl
        self.most = most
        self._items: dict[str, tuple[float, Item]] = {}

    def remember(self, job_id: str, item: Item) -> None:
        self._items.pop(job_id, None)
        self._items[job_id] = (now(), item)
        if len(self._items) > self.most:   # oldest first: dicts keep insertion order
            for stale in list(self._items)[: len(self._items) - self.most]:
                del self._items[stale]

    def recall(self, job_id: str) -> Item | None:
        seen = self._items.get(job_id)
        if seen is None or now() - seen[0] > self.ttl:
            return None
        return seen[1]

    def forget(self, job_id: str) -> None:
        self._items.pop(job_id, None)
