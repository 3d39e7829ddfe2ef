"""The dispatch container's scheduling records of the live jobs, kept from pass
to pass and brought up to date by the jobs that changed (views.QueueView).

A pass walked every live item to list the pending and running jobs, sorted
them by tier, and the estimates and the index the supervisor keeps walked
them again: at 20,000 queued jobs most of a warm pass that started one job.
The view now notes which jobs it took a new item of or dropped since the
listing was last brought up (`QueueView.dirty`; None after a whole read), so
the listing makes records of those alone and keeps the rest in place: the
pending jobs in (tier, seq) order, the running ones and the items of those
waiting to retry in seq order, as a whole listing orders them (a pass's
requests, limits and retries read those few). It also logs, in order, which pending jobs each update
set or dropped, and hands the log out against a mark (ports.PendingFeed), so
the supervisor's estimates and index look at those jobs alone.

A whole listing (a cold container, the view's periodic whole read, a pass
whose reads were not kept) starts a new era: a mark of an earlier one is
answered "not known", and its reader looks at every job."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from ...models.job import JobState
from ...ports.store import PendingChanges
from ...scheduling.snapshot import PendingJob, RunningJob
from . import items as it
from . import tables as t
from .items import ACTIVE, PENDING

RETRY_WAIT = JobState.RETRY_WAIT.value

R = TypeVar("R")
Item = dict[str, Any]
# a live job's item, the scheduling record made of it (None: waiting to retry) and its key in its list
Entry = tuple[Item, PendingJob | RunningJob | None, tuple]
LOG_AT_LEAST = 4096   # the changes kept for `feed`: at least this many, else twice the pending jobs


class _Sorted(Generic[R]):
    """Records in key order, each found by its key: an insert or a removal moves the tail of a
    list (memmove), which at 100,000 jobs is microseconds against a walk's tens of milliseconds."""

    def __init__(self) -> None:
        self.keys: list[tuple] = []
        self.records: list[R] = []

    def add(self, key: tuple, record: R) -> None:
        at = bisect_left(self.keys, key)
        self.keys.insert(at, key)
        self.records.insert(at, record)

    def remove(self, key: tuple) -> None:
        at = bisect_left(self.keys, key)
        if at == len(self.keys) or self.keys[at] != key:
            raise KeyError(key)
        del self.keys[at]
        del self.records[at]

    def rebuilt(self, keyed: list[tuple[tuple, R]]) -> None:
        keyed.sort(key=lambda pair: pair[0])
        self.keys = [key for key, _ in keyed]
        self.records = [record for _, record in keyed]


class LiveListing:
    """What scheduling_view() answers in a pass, kept between passes."""

    def __init__(self) -> None:
        # job id -> its entry: an item is replaced when its job changes, never edited in place, so
        # the same item means the same record
        self.kept: dict[str, Entry] = {}
        self.pending: _Sorted[PendingJob] = _Sorted()
        self.running: _Sorted[RunningJob] = _Sorted()
        self.retrying: _Sorted[Item] = _Sorted()   # the items of jobs waiting to retry, in seq order
        self.era = 0
        self.log: list[tuple[str, bool]] = []   # pending jobs set (True) or dropped (False) in this era
        # while a bringing up is under way: one that failed halfway (a malformed item) leaves the
        # lists and `kept` out of step, so the next lists whole, in a new era
        self._unsure = False

    def view(self) -> tuple[list[PendingJob], list[RunningJob]]:
        return list(self.pending.records), list(self.running.records)

    def running_items(self) -> list[Item]:
        """The running jobs' items (STARTING and RUNNING), in seq order."""
        kept = self.kept
        return [kept[run.id][0] for run in self.running.records]

    def retrying_items(self) -> list[Item]:
        """The items of the jobs waiting to retry, in seq order."""
        return list(self.retrying.records)

    def brought_up(self, live: dict[str, Item], dirty: Iterable[str] | None) -> None:
        """Up to `live` (job id -> projected item): the jobs in `dirty` alone, or all (None)."""
        if dirty is None or self._unsure:
            self._unsure = True
            self._whole(live)
            self._unsure = False
            return
        self._unsure = True
        kept, log = self.kept, self.log
        for job_id in dirty:
            item = live.get(job_id)
            seen = kept.get(job_id)
            if seen is not None and seen[0] is item:
                continue
            was_pending = seen is not None and self._take(seen)
            made = _made(item) if item is not None else None
            if made is not None:
                kept[job_id] = made
                _, record, key = made
                if isinstance(record, PendingJob):
                    self.pending.add(key, record)
                    log.append((job_id, True))
                    continue
                if record is None:
                    self.retrying.add(key, made[0])
                else:
                    self.running.add(key, record)
            elif seen is not None:
                del kept[job_id]
            if was_pending:
                log.append((job_id, False))
        if len(log) > max(LOG_AT_LEAST, 2 * len(self.pending.records)):
            self._forget()   # a reader that far behind looks at every job: cheaper than the log
        self._unsure = False

    def _take(self, seen: Entry) -> bool:
        """Out of its list; whether it was pending."""
        _, record, key = seen
        if isinstance(record, PendingJob):
            self.pending.remove(key)
            return True
        (self.retrying if record is None else self.running).remove(key)
        return False

    def feed(self, mark: object | None) -> tuple[object, PendingChanges | None]:
        """A mark for the listing as it stands, and the pending jobs' changes since `mark`: each
        with its record now (None: no longer pending), in the order made; None where not known."""
        now = (self.era, len(self.log))
        if not (isinstance(mark, tuple) and len(mark) == 2 and mark[0] == self.era and mark[1] <= now[1]):
            return now, None
        kept = self.kept
        # a job set earlier in the log and since dropped or started is given as it is now
        return now, [(job_id, _pending(kept.get(job_id)) if present else None)
                     for job_id, present in self.log[mark[1]:]]

    def _whole(self, live: dict[str, Item]) -> None:
        kept: dict[str, Entry] = {}
        old = self.kept
        pending: list[tuple[tuple, PendingJob]] = []
        running: list[tuple[tuple, RunningJob]] = []
        retrying: list[tuple[tuple, Item]] = []
        for job_id, item in live.items():
            seen = old.get(job_id)
            made = seen if seen is not None and seen[0] is item else _made(item)
            if made is None:
                continue
            kept[job_id] = made
            if isinstance(made[1], PendingJob):
                pending.append((made[2], made[1]))
            elif made[1] is None:
                retrying.append((made[2], item))
            else:
                running.append((made[2], made[1]))
        self.kept = kept
        self.pending.rebuilt(pending)
        self.running.rebuilt(running)
        self.retrying.rebuilt(retrying)
        self._forget()

    def _forget(self) -> None:
        self.era += 1
        self.log = []


def _pending(seen: Entry | None) -> PendingJob | None:
    return seen[1] if seen is not None and isinstance(seen[1], PendingJob) else None


def _made(item: Item) -> Entry | None:
    """A live item's entry: a pending job's key is its tier first; None for an item in no live state."""
    state = item[t.STATE]
    if state in PENDING:
        job = it.pending_job(item)
        return item, job, (job.tier, item[t.SEQ], job.id)
    if state in ACTIVE:
        return item, it.running_job(item), (item[t.SEQ], item[t.ID])
    if state == RETRY_WAIT:
        return item, None, (item[t.SEQ], item[t.ID])
    return None
