"""How many of its holds and releases a dispatch pass writes.

A pass's plan lists every queued job its team's budget no longer covers (to
hold) and every held one the budget covers again (to release: as many as it
could start). A team whose queue is large moves all of it at once when it
crosses its budget, and at the month's turn when the new budget covers it. On DynamoDB each
move rewrites the job's item on the same few index partitions (by_state HELD or
QUEUED, by_team its team, the pass index), about 4 write units a job on each,
and one partition takes about 1,000 a second: 100,000 tasks are 400,000 units
on each, minutes of writes. Written in one pass before its starts, they are
throttled past the store's retries, the pass fails, and no team starts anything.

So a pass:
- starts what it decides first: the holds wait, the starts do not;
- then writes at most `per_pass` holds and releases (releases first, in the
  plan's order: they let jobs start at the next pass), none once the pass's time
  is up; a write the store refuses (throttled past its retries) ends them for
  this pass without failing it;
- leaves the rest for later passes: the supervisor wakes the next one while
  some are left, unless the store refused this one's (then the next tick goes on).

The budget watch writes its own holds and releases the same way, a bounded
number a tick (services/budget_watch.py).

A hold that lags its plan never lets a job start: every pass checks every job
against its team's budget (scheduling/plan.py), held or not, and a user's hold
at the gate. A release that lags only puts off that job's start until the pass
after it is written."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..models.errors import BackendUnavailable, Conflict, NotFound
from ..models.job import JobRecord, JobState
from ..ports import Change, JobRecords, apply_all_else_each
from ..scheduling import Plan

log = logging.getLogger("gqa.holding")
RELEASED = "the team's budget allows it again"


@dataclass(frozen=True)
class Written:
    """What one pass or tick did of its holds and releases."""

    jobs: list[JobRecord]   # as written (a job that moved meanwhile is skipped: the next pass decides it again)
    left: int               # left for later passes
    refused: bool           # the store refused the write: the next tick, not a wake-up, goes on


def moves(release: Iterable[str], hold: Mapping[str, str], now: float) -> list[Change]:
    """The releases, then the holds, each in the order given."""
    out = [Change(j, JobState.HELD, JobState.QUEUED, RELEASED, now) for j in release]
    out += [Change(j, JobState.QUEUED, JobState.HELD, reason, now) for j, reason in hold.items()]
    return out


def write_some(store: JobRecords, changes: list[Change], *, most: int | None = None,
               time_left: bool = True) -> Written:
    """Write the first `most` (None: all) of these holds and releases in one write; none
    without `time_left`. A store that cannot take the write is logged, not raised."""
    if not changes:
        return Written([], 0, False)
    if not time_left:
        return Written([], len(changes), False)
    batch = changes if most is None else changes[:most]
    try:
        # a job cancelled or gone meanwhile must not stop the others
        written = [j for j in apply_all_else_each(store.apply, batch, (Conflict, NotFound)) if j is not None]
    except BackendUnavailable as exc:
        log.warning("%d hold(s) and release(s) not written (%s); a later pass writes them", len(changes), exc)
        return Written([], len(changes), True)
    left = len(changes) - len(batch)
    if left:
        log.info("%d hold(s) and release(s) written, %d left for a later pass", len(batch), left)
    return Written(written, left, False)


def hold_and_release(store: JobRecords, decision: Plan, now: float, *, per_pass: int | None = None,
                     time_left: bool = True) -> Written:
    """At most `per_pass` of a pass's holds and releases, releases first (write_some)."""
    return write_some(store, moves(decision.release, decision.hold, now), most=per_pass, time_left=time_left)
