"""`gqa history`: finished and running jobs, newest first, as JobSummary rows
(gqa.models.accounting), a page at a time or all of a window for a report.

Which jobs a window holds is HistoryQuery's rule (gqa.ports): a finished job
belongs to the window its end falls in, a running one to every window from
its start on; the store reads them by an index on the end time
(HistoryReads)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from ..models.accounting import JobSummary, summarise
from ..models.errors import SpecError
from ..models.job import JobState
from ..models.times import AHEAD, EARLIEST, check_window, utc
from ..ports import HISTORY_STATES, Clock, HistoryQuery, HistoryReads, Inventory
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
        other = sorted(s.value for s in query.states - HISTORY_STATES)
        if other:
            raise SpecError(f"history lists finished and running jobs, not {', '.join(other)} ones: "
                            "`gqa queue` shows the jobs still waiting")
    if query.name is not None and not query.name:
        raise SpecError("--name needs a name or a pattern such as 'train-*'")
    return query


class HistoryService:
    def __init__(self, store: HistoryReads, clock: Clock, inventory: Callable[[], Inventory | None] | None = None):
        """`inventory`: the GPUs' prices, for what a running attempt has cost so far (as `gqa cost`
        counts it); without it a running job shows what its ended attempts cost."""
        self.store, self.clock, self.inventory = store, clock, inventory

    def list(self, query: HistoryQuery, token: str | None = None) -> HistoryPage:
        """One page: the running jobs first (latest start first), then the finished ones (latest end first)."""
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


# what people call the states a history lists (`gqa history --state`), and a few spellings of them
STATE_WORDS = {"completed": JobState.SUCCEEDED, "succeeded": JobState.SUCCEEDED, "failed": JobState.FAILED,
               "timed out": JobState.TIMED_OUT, "timeout": JobState.TIMED_OUT, "cancelled": JobState.CANCELLED,
               "canceled": JobState.CANCELLED, "rejected": JobState.REJECTED, "running": JobState.RUNNING}


def states_of(words: Iterable[str]) -> frozenset[JobState] | None:
    """States from people's words ("completed", "timed out" or timed_out, ...; commas allowed); None for none."""
    found: set[JobState] = set()
    for word in (w for text in words for w in text.split(",")):
        key = " ".join(word.strip().lower().replace("_", " ").replace("-", " ").split())
        if not key:
            continue
        if key not in STATE_WORDS:
            raise SpecError(f"unknown state {word.strip()!r}: use {', '.join(_WORDS)}")
        found.add(STATE_WORDS[key])
    return frozenset(found) or None


_WORDS = ("completed", "failed", "timed out", "cancelled", "rejected", "running")
