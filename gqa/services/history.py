"""`gqa history`: finished jobs and the ones that have run and not finished
(running, or between attempts: requeued, reclaimed, preempted or waiting to
retry), newest first, as JobSummary rows (gqa.models.accounting), a page at
a time or all of a window for a report.

Which jobs a window holds is HistoryQuery's rule (gqa.ports): a finished job
belongs to the window its end falls in, one that has run and not finished to
every window from its first attempt's start on, as Slurm's sacct lists a
requeued job; a
report asks for the jobs not started yet too, for its "still waiting". The
store reads them by indexes on the end time and of the jobs not finished
(HistoryReads)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from ..models.accounting import JobSummary, summarise
from ..models.errors import SpecError
from ..models.job import JobState
from ..models.times import AHEAD, EARLIEST, check_window, utc
from ..ports import BETWEEN_ATTEMPTS, HISTORY_STATES, WAITING_STATES, Clock, HistoryQuery, HistoryReads, Inventory
from .settle import hourly_rate

__all__ = ["MAX_LIMIT", "STATE_WORDS", "HistoryPage", "HistoryQuery", "HistoryService", "check_query", "states_of"]

MAX_LIMIT = 1000     # jobs a page holds at most: about 1 KB each on the wire, within Lambda's 6 MB answer


@dataclass(frozen=True)
class HistoryPage:
    rows: list[JobSummary]
    next: str | None        # the token of the page after this one; None on the last


def check_query(query: HistoryQuery) -> HistoryQuery:
    """The query as the store reads it; SpecError, with the numbers, for one that lists nothing by mistake."""
    check_window(query.since, query.until)
    if not 1 <= query.limit <= MAX_LIMIT:
        raise SpecError(f"a history page holds 1 to {MAX_LIMIT:,} jobs, not {query.limit:,}")
    if query.states is not None:
        other = sorted(s.value for s in query.states - HISTORY_STATES - (WAITING_STATES if query.waiting else set()))
        if other:
            raise SpecError(f"history lists the jobs that have run or finished, and a {' or '.join(other)} job "
                            "has not run yet: `gqa queue` shows the jobs still waiting")
    if query.name is not None and not query.name:
        raise SpecError("--name needs a name or a pattern such as 'train-*'")
    return query


class HistoryService:
    def __init__(self, store: HistoryReads, clock: Clock, inventory: Callable[[], Inventory | None] | None = None):
        """`inventory`: the GPUs' prices, for what a running attempt has cost so far (as `gqa cost`
        counts it); without it a running job shows what its ended attempts cost."""
        self.store, self.clock, self.inventory = store, clock, inventory

    def list(self, query: HistoryQuery, token: str | None = None) -> HistoryPage:
        """One page: the jobs not finished first (running or between attempts, latest start first),
        then the finished ones (latest end first)."""
        query, now = check_query(query), self.clock.now()
        # a window past a year ahead or before 1970 holds no job; the store would walk it a day at a time
        for end, at in (("begins", query.since), ("ends", query.until)):
            if at is not None and not EARLIEST <= at <= now + AHEAD:
                raise SpecError(f"the window {end} at {utc(at)}: history holds times from {utc(EARLIEST)} "
                                f"to a year from now ({utc(now + AHEAD)})")
        jobs, after = self.store.history(query, token)
        inventory = self.inventory() if self.inventory is not None and any(
            j.state == JobState.RUNNING for j in jobs) else None
        return HistoryPage([summarise(job, now, hourly=hourly_rate(job, inventory) if inventory else 0.0)
                            for job in jobs], after)

    def rows(self, query: HistoryQuery) -> Iterator[JobSummary]:
        """Every job of the window, page after page of the largest size (query.limit is ignored)."""
        query = replace(query, limit=MAX_LIMIT)
        token: str | None = None
        while True:
            page = self.list(query, token)
            yield from page.rows
            if page.next is None:
                return
            token = page.next


# what people call the states a history lists (`gqa history --state`), and a few spellings of them; a
# requeued job is one that has run and waits to run again, whatever it waits in (its status says)
STATE_WORDS: dict[str, frozenset[JobState]] = {
    "completed": frozenset({JobState.SUCCEEDED}), "succeeded": frozenset({JobState.SUCCEEDED}),
    "failed": frozenset({JobState.FAILED}), "timed out": frozenset({JobState.TIMED_OUT}),
    "timeout": frozenset({JobState.TIMED_OUT}), "cancelled": frozenset({JobState.CANCELLED}),
    "canceled": frozenset({JobState.CANCELLED}), "rejected": frozenset({JobState.REJECTED}),
    "running": frozenset({JobState.RUNNING}), "requeued": BETWEEN_ATTEMPTS}
# the statuses a requeued job shows, which --state takes as "requeued" alone
_REQUEUED_SHOWN = ("pending", "held", "starting", "retrying")


def states_of(words: Iterable[str]) -> frozenset[JobState] | None:
    """States from people's words ("completed", "timed out" or timed_out, ...; commas allowed); None for none."""
    found: set[JobState] = set()
    for word in (w for text in words for w in text.split(",")):
        key = " ".join(word.strip().lower().replace("_", " ").replace("-", " ").split())
        if not key:
            continue
        if key in _REQUEUED_SHOWN:
            raise SpecError(f"unknown state {word.strip()!r}: a job that has run and waits to run again shows "
                            f"{', '.join(_REQUEUED_SHOWN)}; --state requeued lists them all (`gqa queue` shows "
                            "the jobs not started yet)")
        if key not in STATE_WORDS:
            raise SpecError(f"unknown state {word.strip()!r}: use {', '.join(_WORDS)}")
        found |= STATE_WORDS[key]
    return frozenset(found) or None


_WORDS = ("completed", "failed", "timed out", "cancelled", "rejected", "running", "requeued")
