"""The queue view the daemon keeps, as slurmctld keeps what squeue reads:
`gqa queue` on 10,000 jobs would otherwise read them all and run the
explaining pass and the start-time replay in every command.

A quarter of a second after a turn of the loop in which the store changed
(its revision moved), or once a pending job's --begin time has come (time
alone changes the view then), the keeper computes QueryService.queue's
answer and keeps it: in memory for GET /queue on a shared box, and, for a
personal queue, as a file in the home the owner's CLI reads
(gqa/adapters/local/kept_queue.py). It never
holds up a start: it runs after the tick's launches, only when nothing else
is due, at most once a second, and waits SHARE times what the last one took
before the next, so it costs at most a fifth of the loop's time however long
the queue. A failure is logged once per kind; readers then compute the queue
themselves (the stamp no longer matches)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gqa.services.queries import QueueView

    from .wiring import DaemonWiring

log = logging.getLogger("gqa.daemon")
EVERY = 1.0      # seconds at least between two views
SHARE = 4.0      # ... and at least this many times what the last one took
SETTLE = 0.25    # seconds from seeing a change to the view: the jobs just launched get the CPU first


@dataclass
class QueueKeeper:
    wiring: DaemonWiring
    write_file: bool                  # a personal queue: its owner's CLI reads the file
    kept: QueueView | None = None
    revision: int = -1
    until: float | None = None        # when time alone changes the kept view (time.time())
    due: float = 0.0                  # time.monotonic()
    changed_at: float | None = None   # when a change not in the view was first seen
    failing: str = ""

    def refresh(self) -> bool:
        """Compute and publish the view if the store changed since the last one
        and one is due; True when it did."""
        now = time.monotonic()
        try:
            store = self.wiring.store
            revision = store.revision()   # read first: a write during the pass makes the view stale, never wrong
            if revision == self.revision and (self.until is None or time.time() < self.until):
                self.changed_at = None
                return False
            if self.changed_at is None:
                self.changed_at = now
            self.due = max(self.due, self.changed_at + SETTLE)
            if now < self.due:
                return False
            view = self.wiring.queries().queue()
            from gqa.http.queue_listing import changes_at, listing_of, stamped

            at = time.time()
            until = changes_at(view, at)
            if self.write_file:
                from gqa.adapters.local import kept_queue

                kept_queue.write(self.wiring.paths, stamped(listing_of(view), queue_id=store.queue_id(),
                                                            revision=revision, at=at, until=until))
        except Exception as exc:
            self.due = time.monotonic() + EVERY
            message = f"{type(exc).__name__}: {exc}"
            if message != self.failing:
                log.warning("could not keep the queue's view (gqa queue computes it meanwhile): %s", exc)
                self.failing = message
            return False
        if self.failing:
            log.info("the queue's view is kept again")
            self.failing = ""
        self.kept, self.revision, self.until, self.changed_at = view, revision, until, None
        took = time.monotonic() - now
        self.due = time.monotonic() + max(EVERY - took, SHARE * took)
        return True

    def keep_now(self) -> bool:
        """refresh() without waiting out the debounce or the settling time (benchmarks, tests)."""
        self.due, self.changed_at = 0.0, time.monotonic() - SETTLE
        return self.refresh()

    def wait(self) -> float | None:
        """Seconds until a change seen is due to be kept, or the kept view's time runs
        out; None when neither is ahead."""
        if self.changed_at is not None:
            return max(0.0, self.due - time.monotonic())
        return None if self.until is None else max(0.0, self.until - time.time())

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
