"""Listings the api function computes once for all their pages.

A queue's listing is a whole scheduling pass and a group's a read of its
whole partition: a page is a slice of one, not another pass or read. The
first page's listing is kept in this container for KEPT seconds, named by
the pages' `next` tokens; a token another container made, or an older one,
computes the listing again (pages go by seq either way, so they still add up)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Hashable
from typing import Any

KEPT = 60.0
MOST = 8           # listings kept at once (each up to a few MB at 10,000 jobs)


class Kept:
    def __init__(self, *, kept: float = KEPT, most: int = MOST, clock: Callable[[], float] = time.monotonic):
        self.kept, self.most, self.clock = kept, most, clock
        self._views: dict[str, tuple[float, Hashable, Any]] = {}

    def get(self, key: Hashable, named: str | None, compute: Callable[[], Any]) -> tuple[str, Any]:
        """The listing `named` holds if this container keeps it for the same `key`
        (what it lists: a group, a job reference), else `compute()`d and kept under a new name."""
        now = self.clock()
        for stale in [k for k, (at, _, _) in self._views.items() if now - at >= self.kept]:
            del self._views[stale]
        held = self._views.get(named) if named else None
        if held is not None and held[1] == key:
            return named, held[2]   # type: ignore[return-value]
        value = compute()
        name = uuid.uuid4().hex[:16]
        self._views[name] = (now, key, value)
        while len(self._views) > self.most:   # oldest first: dicts keep insertion order
            del self._views[next(iter(self._views))]
        return name, value

    def clear(self) -> None:
        self._views.clear()


queues = Kept()
groups = Kept()
