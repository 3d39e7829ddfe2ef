"""The job store, split by concern: the job records and their guarded
changes, the settings, the usage ledger, and what the control loop reads of
the queue. A service asks for the narrowest of these it uses; `JobStore`
combines them for the few that need all (the supervisor, the budget watch,
queries). Each backend's store implements them all."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from ..models.errors import Conflict
from ..models.job import JobRecord, JobState
from ..scheduling.snapshot import Gpu, PendingJob, Policy, RunningJob, TeamPolicy

# `list` is also a method of JobRecords: annotations below it name the builtin this way
List = list


@dataclass(frozen=True)
class Change:
    """One guarded change: move job `job_id` from `expect` to `to` (or, with
    `to` None, update `fields` only while it is still in `expect`). With
    `unchanged`, also only while the job still holds those values: a
    read-modify-write names what it read (an update's spec), so a change
    written since its read is never overwritten (Conflict: read again)."""

    job_id: str
    expect: JobState
    to: JobState | None
    reason: str
    at: float
    fields: dict | None = None
    usage: float = 0.0   # GPU-seconds to add to the job's team in the same transaction
    cost: float = 0.0    # money to add to the team's spend for the period of `at`, likewise
    unchanged: dict | None = None   # field -> the value the caller read, checked with the state

    def holds_for(self, job: JobRecord) -> bool:
        """Whether `job`, as it is now, is still what this change expects: its state and `unchanged`."""
        return job.state == self.expect and all(getattr(job, name) == value
                                                for name, value in (self.unchanged or {}).items())


@dataclass(frozen=True)
class Inventory:
    gpus: tuple[Gpu, ...]
    cpus: int | None = None
    memory: int | None = None


class JobRecords(Protocol):
    """Durable job records. Every state change is one atomic write guarded on
    the current state: a stale writer gets Conflict, never a lost update."""

    def create(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """Insert the jobs of one submission atomically, assigning ids and seq;
        job.group == "" asks for a fresh group id (array tasks share it).
        Jobs that arrive with an id (reserved by reserve_ids) are written under
        it only if no job has it yet: a job that exists is left as it is, so a
        redelivered submission is harmless. Returns the stored records."""

    def reserve_ids(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """The jobs with id, group and seq assigned as create() would assign them,
        reserved for good (never handed out again); nothing else is written."""

    def reserved(self, group: str) -> bool:
        """Whether reserve_ids (or create) has handed out this group id ("12";
        an array's tasks are "12_0", "12_1", ...), its jobs recorded or not.
        Reads the id counter only; False for an id the store never makes."""

    def purged(self, group: str) -> float | None:
        """Where the group id was handed out and its jobs were recorded and then deleted past the history
        retention: the seconds they were kept after their end (0.0 where not known); else None. A
        store that cannot tell a deleted job from one not recorded yet (DynamoDB: an accepted
        submission awaiting admission, or an item its TTL deleted) answers None."""

    def get(self, job_id: str) -> JobRecord: ...

    def resolve(self, ref: str, *, history: bool = True) -> list[JobRecord]:
        """A job id or a group id (array, sweep) -> its jobs; NotFound if none.
        With history=False the records carry no transitions: far cheaper for
        a big array (one read for the group, not one per job)."""

    def list(self, states: Iterable[JobState] | None = None, *, team: str | None = None,
             limit: int | None = None, history: bool = False) -> list[JobRecord]:
        """Jobs in submission order; with history=True each carries its transitions."""

    def state_counts(self) -> dict[JobState, int]:
        """How many jobs are in each state; states with none are left out."""

    def apply(self, changes: List[Change]) -> List[JobRecord]:
        """Apply state changes in one transaction; each is guarded on the
        state it expects. Raises Conflict (and applies nothing) on a mismatch.
        A change's `usage` is added to its team's decayed usage atomically."""

    def record_start(self, job_id: str, attempt: int, token: str, started_at: float,
                     reason: str) -> JobRecord | None:
        """Record that attempt `attempt` (launched as `token`, the proc_token)
        started at `started_at`: STARTING -> RUNNING with `reason`, started_at
        set, exit_code and signal cleared, in one write that reads nothing
        first. Applies only while the job is STARTING on that attempt and
        token; else changes nothing and returns None (a duplicate, a late
        event, a job that moved or is unknown, or one the backend must first
        read to write: the caller then reads and decides). Returns the record
        as apply() would (the recent history at least)."""

    def apply_each(self, changes: List[Change]) -> List[bool]:
        """Apply each change that still holds and skip the others: each is
        guarded on the state it expects, as in apply(), but a job that moved on
        (or is gone) leaves the rest to apply. Whether each applied. For many
        jobs at once (a big array's cancel): as few transactions as the backend
        allows, and nothing is read back."""


class Settings(Protocol):
    """The GPUs the queue schedules over, the policy, and each team's quotas and members."""

    def inventory(self) -> Inventory | None: ...

    def set_inventory(self, inventory: Inventory) -> None: ...

    def policy(self) -> Policy: ...

    def current_policy(self) -> tuple[Policy, int]:
        """The policy as stored now (never a kept copy) and its revision, for a
        read-modify-write: set_policy guarded on that revision."""

    def set_policy(self, policy: Policy, *, revision: int | None = None) -> None:
        """Write the whole policy. With `revision` (current_policy's), only while
        it is still the stored one: Conflict, nothing written, if another write
        came between. Every write moves the revision on."""

    def teams(self) -> dict[str, TeamPolicy]: ...

    def current_team(self, team: str) -> tuple[TeamPolicy | None, int]:
        """The team's stored policy (None: not configured; revision 0 if never
        written) as stored now, and its revision, for set_team's guard."""

    def set_team(self, team: str, policy: TeamPolicy, *, revision: int | None = None) -> None:
        """Write the team's whole policy (its members stay). With `revision`
        (current_team's), only while it is still the stored one: else Conflict,
        nothing written. Every write of the team moves its revision on, its
        members' included."""

    def team_members(self) -> dict[str, tuple[str, ...]]:
        """Each team's member patterns (users, IAM ARN patterns, @groups); teams with none left out."""

    def set_team_members(self, team: str, members: tuple[str, ...]) -> None:
        """Replace a team's members; a team not configured yet gets the default policy."""


class UsageLedger(Protocol):
    """What teams used and spent: written by the changes that carry `usage`
    and `cost` (JobRecords.apply), read here."""

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        """Decayed GPU-seconds per team as of now, running jobs counted as they run."""

    def spend(self, period: str) -> dict[str, float]:
        """Money spent per team in a budget period (finished attempts)."""


@dataclass(frozen=True)
class QueueListing:
    """The live jobs as one state of the store held them, for the views that list the queue
    (`gqa queue`, `gqa top`): the scheduling view and the records of the very same jobs, so the
    positions, reasons and free GPUs a view tells are those of the rows it shows, however fast
    short jobs start and end meanwhile."""

    pending: List[PendingJob]     # as scheduling_view() gives them
    running: List[RunningJob]
    # every job waiting (job.PENDING) or holding resources (STARTING, RUNNING), in seq order, without
    # transitions but the STARTING ones' (a launch's wait is timed from its claim)
    records: List[JobRecord]


class QueueReads(Protocol):
    """What the control loop reads of the queue each turn."""

    def scheduling_view(self) -> tuple[list[PendingJob], list[RunningJob]]:
        """QUEUED and HELD jobs as the scheduler sees them, and the jobs holding GPUs."""

    def queue_listing(self) -> QueueListing:
        """The live jobs and their scheduling view from one state of the store (QueueListing):
        SQLite's in one read transaction; DynamoDB's, which has none across queries, both made
        from the same items, each job once, as the latest write read of it left it."""

    def with_requests(self) -> list[JobRecord]:
        """Active jobs whose owner asked for a cancel or requeue not yet carried out."""

    def next_wakeup(self) -> float | None:
        """The earliest not_before of a job in RETRY_WAIT."""

    def states_of(self, refs: Iterable[str]) -> dict[str, dict[JobState, int]]:
        """What pending jobs' dependencies name, as they stand: per job id, array
        task id ("12_3") or array id ("12", all its tasks), how many of its jobs
        are in each state; an array still being admitted in chunks (AWS) counts
        the tasks not written yet as SUBMITTED. A ref that names no recorded
        job is left out; one whose jobs were recorded and deleted past the
        history retention (they had ended) maps to no states, `{}`, where the
        store can tell."""

    def start_times(self, refs: Iterable[str]) -> dict[str, tuple[float, bool]]:
        """When an `after` delay (after:12+10) counts from, for the refs (as in states_of) whose
        jobs have all started or ended: the latest of their starts, a job that ended unstarted
        (cancelled while it waited) by its end, and whether any of them started. A ref with a
        job that has not started yet, or that names no recorded job, is left out."""

    def due_retries(self, now: float) -> list[JobRecord]: ...

    def runtime_samples(self, limit: int = 500) -> list[tuple[str, float, float]]:
        """(team, actual run time, wall-time limit) of recent successful jobs that had a limit."""


# the pending jobs' changes in the order the store made them: each job's record now, or None where
# it left the pending jobs since (a job may appear more than once)
PendingChanges = list[tuple[str, PendingJob | None]]


@runtime_checkable
class PendingFeed(Protocol):
    """A store that says which pending jobs changed between two of its reads: a dispatcher that
    keeps its records and index between passes then looks at those jobs alone (SQLite's store, and
    DynamoDB's in a pass of the dispatch function's container). Replayed in order on the listing of
    the earlier read, the changes give the jobs of this one, not necessarily in its order."""

    def scheduling_feed(self, mark: object | None) -> tuple[list[PendingJob], list[RunningJob], object,
                                                             PendingChanges | None]:
        """scheduling_view(), a mark for it, and the pending jobs' changes since `mark` (a mark an
        earlier call returned): None where they are not known (no mark, or a whole read since)."""


@dataclass(frozen=True)
class HistoryQuery:
    """Which jobs a history lists (`holds`): the finished ones whose end
    falls in [since, until) (`until` None: up to now), so that consecutive
    windows count each job once, and the ones that have started and not
    finished (running, or between attempts: back in the queue or waiting to
    retry) whose first attempt started before `until` (`first_ran`), as sacct
    lists them. With `waiting`,
    also the jobs not started yet that were submitted before `until` (a
    report's "still waiting"; `gqa queue` shows them otherwise). The filters
    narrow it; `states` None means every state of those (a state that is
    none of them lists nothing)."""

    since: float
    until: float | None = None
    owner: str | None = None
    team: str | None = None
    states: frozenset[JobState] | None = None
    group: str | None = None      # an array's (or sweep's) id: its tasks
    name: str | None = None       # a glob, as the shell's: "train-*"
    limit: int = 100              # jobs per page
    waiting: bool = False         # also the jobs not started yet

    def wants(self, state: JobState) -> bool:
        listed = HISTORY_STATES | WAITING_STATES if self.waiting else HISTORY_STATES
        return state in (listed if self.states is None else self.states & listed)

    def holds(self, job: JobRecord) -> bool:
        """The rule every store reads by: whether `job` is in this history, filters aside
        (owner, team, group and name are plain matches)."""
        if not self.wants(job.state):
            return False
        if job.state.terminal:
            return (job.ended_at is not None and self.since <= job.ended_at
                    and (self.until is None or job.ended_at < self.until))
        if has_run(job):
            return self.until is None or first_ran(job) < self.until
        return self.waiting and (self.until is None or job.submitted_at < self.until)


def first_ran(job: JobRecord) -> float:
    """When the job first held its GPUs: its first attempt's start, from its transitions (the
    record's started_at is its last attempt's), else that start, else its submission."""
    starts = [at for at in (job.first_start, job.started_at) if at is not None]
    return min(starts) if starts else job.submitted_at


def has_run(job: JobRecord) -> bool:
    """Whether the job has held its GPUs at least once: running, or an earlier attempt did
    (settlement keeps that attempt's start). A history lists it from then on."""
    return job.state == JobState.RUNNING or job.started_at is not None


# the states a job that has run waits in for its next attempt (pending, held, starting, retrying)
BETWEEN_ATTEMPTS = frozenset({JobState.QUEUED, JobState.HELD, JobState.STARTING, JobState.RETRY_WAIT})
# what a history lists: finished jobs, running ones, and the ones between attempts
HISTORY_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED,
                            JobState.REJECTED, JobState.RUNNING}) | BETWEEN_ATTEMPTS
# the states of a job not started yet, which a history lists only when asked (`waiting`)
WAITING_STATES = frozenset({JobState.SUBMITTED, JobState.PENDING_APPROVAL}) | BETWEEN_ATTEMPTS


class HistoryReads(Protocol):
    """The jobs of a window (HistoryQuery.holds), newest first, a page at a
    time: `gqa history`, reports and the live views' recent ends read them here."""

    def history(self, query: HistoryQuery, after: str | None = None) -> tuple[List[JobRecord], str | None]:
        """One page of at most `query.limit` jobs: the unfinished ones first
        (running or between attempts, latest start first: an attempt's start
        is the record's; then, with `waiting`, the ones not started yet),
        then the finished ones (latest end first), each with its transitions
        but without its spec and environments; and the opaque token of the
        next page (None after the last). `after` is such a token (SpecError
        for one this store did not make). Reads indexes by end time and of
        the jobs not finished: the cost follows the page and the queue, not
        the jobs kept."""

    def prune_history(self, before: float, batch: int, *, keep: float | None = None) -> int:
        """Delete at most `batch` finished jobs that ended before `before`,
        with their transitions, in one transaction; how many. A finished job
        that a job not ended names in its dependency is kept: its end still
        decides that job. Called again until it answers less than `batch` (a
        store whose backend expires items by itself answers 0). `keep`: the
        retention, in seconds, that `purged` then reports."""


@dataclass(frozen=True)
class JobEvent:
    """One transition of one job, as the live views list them."""

    job_id: str
    name: str
    state: JobState      # the state it moved to
    at: float
    reason: str


class RecentEvents(Protocol):
    """The latest transitions across the queue, for `gqa top` and the web page."""

    def recent_events(self, *, since: float, limit: int) -> List[JobEvent]:
        """At most `limit` transitions made at or after `since`, newest first
        (ties: a job's later transition first). Reads what it returns and
        little more: an index by time, never the whole queue's history. On
        DynamoDB the transitions of the `limit` jobs written most recently
        and of those finished since `since`: a job whose only write since was
        not a transition may crowd out an older transition of another."""


class GroupPages(Protocol):
    """A job's or a group's jobs a page at a time (AWS: a 100,000-task array
    is changed over several requests, each going on where the last stopped)."""

    def group_page(self, ref: str, after: str | None, limit: int) -> list[JobRecord]:
        """Up to `limit` of the jobs `ref` names (a job id, or a group's), without
        their history, in the store's order of their ids, those after the job
        `after` (None: from the first); fewer than `limit` only past the last.
        NotFound where `after` is None and the ref names no job."""


class JobsAndSettings(JobRecords, Settings, Protocol):
    """Jobs written against the settings: submission, reconciliation."""


class SchedulingInputs(Settings, UsageLedger, QueueReads, Protocol):
    """What a scheduling snapshot, a cost estimate or a quota view reads."""


class JobStore(JobRecords, Settings, UsageLedger, QueueReads, Protocol):
    """The whole store, for the services that need every part of it."""


R = TypeVar("R")


def apply_all_else_each(apply: Callable[[list[Change]], list[R]], changes: list[Change],
                        skip: tuple[type[Exception], ...] = (Conflict,)) -> list[R | None]:
    """Apply the changes of different jobs in one transaction; if one of them
    no longer holds (`skip`: its job moved meanwhile, or the store refuses
    it), apply the others one by one and skip those that do not hold. Per
    change, what `apply` returned for it, or None where it was skipped."""
    if not changes:
        return []
    try:
        return list(apply(changes))
    except skip:
        pass
    out: list[R | None] = []
    for change in changes:
        try:
            [result] = apply([change])
        except skip:
            result = None
        out.append(result)
    return out
