"""What the DynamoDB store keeps between calls so as to call DynamoDB less,
and for how long. Each saves calls only where an old answer is harmless:

- Expiring: a read reused for `ttl` seconds (settings, runtime samples). A
  store's own writes clear it; another process's writes are seen within ttl.
  Nothing guarded is decided from it: quotas, prices and estimates only.
- PassView: the reads of one scheduling pass (live jobs, the ledger,
  settings), each read at most once while the pass lasts and kept up to date
  with the store's own writes. A pass plans from one snapshot anyway.
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
    ledger: list[Item] | None = None             # the ledger partition
    settings: dict[str, Item] | None = None      # sk -> item, the settings partition
    samples: dict[int, Any] = field(default_factory=dict)


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
