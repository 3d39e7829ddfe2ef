"""The queue view the daemon keeps, as slurmctld keeps what squeue reads:
`gqa queue` on 10,000 jobs would otherwise read them all and run the
explaining pass and the start-time replay in every command.

Once the store has changed (its revision moved) and then been quiet for a
quarter of a second, or once a pending job's --begin time has come (time
alone changes the view then), the keeper computes QueryService.queue's
answer and keeps it: in memory for GET /queue on a shared box, and, for a
personal queue, as a file in the home the owner's CLI reads
(gqa/adapters/local/kept_queue.py). It never holds up a start: it runs after
the tick's launches, only when nothing else is due, at most once a second
and SHARE times what the last one took apart; while the queue keeps
changing (a drain) it waits LONGEST, or BUSY_SHARE times the last one's
cost, so a busy daemon gives it a twentieth of its time at most. Meanwhile
readers compute the queue themselves (the stamp no longer matches), as
they do after a failure, which is logged once per kind."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gqa.services.queries import QueueView

    from .wiring import DaemonWiring

log = logging.getLogger("gqa.daemon")
SETTLE = 0.25    # seconds of quiet after the last change seen: a drain's starts and ends go first
LONGEST = 10.0   # ... or this long after the first change, for a queue that is never quiet
EVERY = 1.0      # seconds at least between two views
SHARE = 4.0      # ... and at least this many times what the last one took, when the queue is quiet
BUSY_SHARE = 20.0   # ... and this many, when it is not: a busy daemon gives the view 5% of its time at most


@dataclass
class QueueKeeper:
    wiring: DaemonWiring
    write_file: bool                  # a personal queue: its owner's CLI reads the file
    kept: QueueView | None = None
    revision: int = -1
    until: float | None = None        # when time alone changes the kept view (time.time())
    due: float = 0.0                  # time.monotonic(): not before this (EVERY, SHARE)
    first_at: float | None = None     # when a change not in the view was first seen
    last_at: float = 0.0              # ... and the latest one
    seen: int = -1                    # the revision last seen
    took: float = 0.0                 # seconds the last view took
    failing: str = ""

    def refresh(self) -> bool:
        """Compute and publish the view if the store changed since the last one
        and one is due; True when it did."""
        now = time.monotonic()
        try:
            revision = self.wiring.store.revision()
        except Exception as exc:
            return self._failed(exc)
        if revision == self.revision and (self.until is None or time.time() < self.until):
            self.first_at = None
            return False
        if self.first_at is None:
            self.first_at = self.last_at = now
        elif revision != self.seen:
            self.last_at = now
        self.seen = revision
        if now < self.ready():
            return False
        return self._keep(revision, now)

    def keep_now(self) -> bool:
        """Compute and publish the view now, whatever the waits (benchmarks, tests)."""
        try:
            revision = self.wiring.store.revision()
        except Exception as exc:
            return self._failed(exc)
        return self._keep(revision, time.monotonic())

    def ready(self) -> float:
        """When a change seen may be kept: after SETTLE of quiet, or LONGEST (BUSY_SHARE
        times the last view's cost, if more) after the first change, and never before `due`."""
        if self.first_at is None:
            return float("inf")
        busy = self.first_at + max(LONGEST, BUSY_SHARE * self.took)
        return max(self.due, min(self.last_at + SETTLE, busy))

    def wait(self) -> float | None:
        """Seconds until a change seen may be kept, or the kept view's time runs out;
        None when neither is ahead."""
        if self.first_at is not None:
            return max(0.0, self.ready() - time.monotonic())
        return None if self.until is None else max(0.0, self.until - time.time())

    def _keep(self, revision: int, now: float) -> bool:
        # the revision was read first: a write during the pass makes the view stale, never wrong
        try:
            view = self.wiring.queries().queue()
            from gqa.http.queue_listing import changes_at, listing_of, stamped

            at = time.time()
            until = changes_at(view, at)
            if self.write_file:
                from gqa.adapters.local import kept_queue

                kept_queue.write(self.wiring.paths, stamped(listing_of(view), queue_id=self.wiring.store.queue_id(),
                                                            revision=revision, at=at, until=until))
        except Exception as exc:
            return self._failed(exc)
        if self.failing:
            log.info("the queue's view is kept again")
            self.failing = ""
        self.kept, self.revision, self.until, self.first_at = view, revision, until, None
        self.took = time.monotonic() - now
        self.due = time.monotonic() + max(EVERY - self.took, SHARE * self.took)
        return True

    def _failed(self, exc: Exception) -> bool:
        self.due = time.monotonic() + EVERY
        message = f"{type(exc).__name__}: {exc}"
        if message != self.failing:
            log.warning("could not keep the queue's view (gqa queue computes it meanwhile): %s", exc)
            self.failing = message
        return False

    def current(self, group: str | None = None) -> QueueView | None:
        """The kept view while the store is as it was computed from (else None:
        compute it), narrowed as QueryService.queue(group=...) narrows it."""
        if (self.kept is None or self.wiring.store.revision() != self.revision
                or (self.until is not None and time.time() >= self.until)):
            return None
        view = self.kept
        if group is None:
            return view
        return replace(view, pending=[e for e in view.pending if group in (e.job.group, e.job.id)],
                       running=[j for j in view.running if group in (j.group, j.id)])
