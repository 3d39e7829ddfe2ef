"""What users do to jobs that exist: cancel, requeue, hold, release, update.
A job that holds no process changes state here at once; a running one gets a
request that the supervisor carries out (SIGTERM, grace, SIGKILL) and settles
on exit. Hold, release and update act on pending jobs only."""

from collections.abc import Callable, Iterable, Iterator, Set
from dataclasses import dataclass
from typing import Any

from ..models.errors import Conflict, GqaError, InvalidTransition, NotFound, SpecError
from ..models.job import JobRecord, JobState, Request, Transition, held_by
from ..models.priority import Priority
from ..models.records import with_changes
from ..models.units import shown
from ..ports import Admissions, Change, Clock, GroupPages, JobsAndSettings, Waker
from . import lookup
from .updates import UPDATABLE, Update, planned_updates


CHUNK = 5000    # jobs cancelled per transaction: a 100,000-task array never holds the store for long
CANCELLED_BY_USER = "cancelled by user"
MAX_REASON = 500   # characters of a denial's reason: a line or two for the owner, shown in every view
HELD_BY_USER, RELEASED_BY_USER = held_by("user"), "released by user"
# the states the tasks of an array still being admitted may be written in, that a cancel decides
PENDING_HERE = frozenset({JobState.QUEUED, JobState.PENDING_APPROVAL, JobState.HELD})

# what one job as read becomes: the change that does it (None: nothing to write) and the result once written
Decide = Callable[[JobRecord, float], tuple[Change | None, "ControlResult"]]
SLICE = 100     # jobs a bounded step reads and writes together (step()), read just before they are written
STEPPED = ("cancel", "hold", "release", "requeue")   # what step() carries out


@dataclass(frozen=True)
class ControlResult:
    job: JobRecord
    action: str          # "cancelled", "cancelling", "requeueing", "held", "released", "updated", "unchanged"
    detail: str = ""


@dataclass(frozen=True)
class Position:
    """Where a change to many jobs goes on: the ref it is at (its place among
    the refs named) and the last job of it done (None: none yet)."""

    ref: int
    after: str | None = None


@dataclass(frozen=True)
class ControlStep:
    """What one bounded step did, and where the next goes on (None: all done)."""

    results: list[ControlResult]
    next: Position | None


class ControlService:
    def __init__(self, store: JobsAndSettings, clock: Clock, waker: Waker | None = None,
                 admissions: Admissions | None = None):
        """`admissions`: where a large array still being admitted in chunks
        (AWS, services/chunked.py) is told what was decided on the whole group,
        so the tasks not written yet are written as decided. The settings are
        read by update() only (the limits an updated job must stay within)."""
        self.store, self.clock, self.waker = store, clock, waker
        self.admissions = admissions

    def cancel(self, refs: list[str]) -> list[ControlResult]:
        """Cancel the jobs named, whole arrays at once: jobs that hold no process
        end here, running ones get the request the supervisor carries out.
        Written CHUNK jobs per transaction, each guarded on the state read; a
        job that moved meanwhile is read again and decided again."""
        decided = self._decide_admitting(refs, PENDING_HERE, Transition(JobState.CANCELLED, self.clock.now(),
                                                                        CANCELLED_BY_USER))
        jobs = self._resolve(refs, decided)
        return self._carry_out(jobs, _cancel)

    def hold(self, refs: list[str], *, caller: str | None = None) -> list[ControlResult]:
        """Hold pending jobs (Slurm's `scontrol hold`), whole arrays at once:
        a queued job becomes HELD by its owner, a job the budget holds is held
        by its owner too; only release() frees either. A job named on its own
        must be pending (checked before anything changes); in an array, tasks
        that are not are left as they are. Holding a held job changes nothing."""
        why = held_by(caller) if caller else HELD_BY_USER
        decided = self._decide_admitting(refs, frozenset({JobState.QUEUED}),
                                         Transition(JobState.HELD, self.clock.now(), why))
        jobs = self._resolve(refs, decided)
        for job in self._named(refs, jobs):
            if job.state not in (JobState.QUEUED, JobState.HELD):
                raise InvalidTransition(_not_pending(job, "held"))
        return self._carry_out(jobs, lambda job, now: _hold(job, now, why))

    def release(self, refs: list[str], *, caller: str | None = None) -> list[ControlResult]:
        """Release jobs their owner or an admin held, whole arrays at once: back
        to QUEUED, in their old place (a team over its budget has them held
        again by the next pass, as the budget's). Others are left as they are."""
        why = f"released by {caller}" if caller else RELEASED_BY_USER
        decided = self._decide_admitting(refs, frozenset({JobState.HELD}),
                                         Transition(JobState.QUEUED, self.clock.now(), why))
        jobs = self._resolve(refs, decided)
        for job in self._named(refs, jobs):   # an ended job named on its own is a mistake, as hold says of it
            if job.state.terminal:
                raise InvalidTransition(f"job {job.id} already {job.status}; only a held job can be released")
        return self._carry_out(jobs, lambda job, now: _release(job, now, why))

    def update(self, ref: str, *, time: int | None = None, priority: Priority | str | None = None,
               gpus: int | None = None) -> list[ControlResult]:
        """Change a pending job's wall time (seconds), priority tier or GPUs
        (Slurm's `scontrol update`), or those of every pending task of an array.
        Pending means QUEUED or HELD: a job awaiting approval is judged at the
        size it was submitted with (cancel it and submit again to change it),
        and one retrying goes back to the queue as it ran. The new values must
        be within the queue's hard limits, as a submission's are, and may not
        make a job need an approval it was not given (Rejected with the numbers).
        The columns and the spec change together, in one write per job guarded
        on its state and on the spec the new one was made from: an update or a
        claim written since (another `gqa update`, the pass starting it) makes
        it read the job again and apply what was asked to the job as it is now,
        or tell why it no longer can."""
        update = Update.of(time=time, priority=priority, gpus=gpus)
        if self.admissions is not None and "_" not in ref:
            progress = self.admissions.progress(ref)
            if progress is not None and progress.remaining:
                raise Conflict(f"array {ref} is still being admitted ({progress.next:,} of {progress.total:,} "
                               "tasks written); update it once every task is written")
        jobs = self._resolve([ref])
        named = self._named([ref], jobs)
        for job in named:
            if job.state not in UPDATABLE:
                raise InvalidTransition(_not_pending(job, "updated"))
        plans = planned_updates(self.store, [job for job in jobs if job.state in UPDATABLE], update)

        def decide(job: JobRecord, now: float) -> tuple[Change | None, ControlResult]:
            if job.state not in UPDATABLE:
                if named:   # it moved on since it was read (claimed, cancelled): as if it had been read so
                    raise InvalidTransition(_not_pending(job, "updated"))
                return None, ControlResult(job, "unchanged", f"not pending ({job.status})")
            plan = plans.get(job.spec_json)
            if plan is None:   # read again after another update: planned from its spec as it is now
                plan = plans[job.spec_json] = planned_updates(self.store, [job], update)[job.spec_json]
            if not plan.fields:
                return None, ControlResult(job, "unchanged", plan.detail)
            return (Change(job.id, job.state, None, "", now, plan.fields, unchanged={"spec_json": job.spec_json}),
                    ControlResult(with_changes(job, **plan.fields), "updated", plan.detail))
        return self._carry_out(jobs, decide)

    def requeue(self, refs: list[str]) -> list[ControlResult]:
        """Requeue running jobs. A job named on its own must be running (checked
        before anything changes); in an array, tasks not running are left as they are."""
        jobs = self._resolve(refs)
        singles = {ref for ref in refs if len(self.store.resolve(ref, history=False)) == 1}
        for job in jobs:
            if job.id in singles:
                _check_requeue(job)
        results = []
        for job in jobs:
            if job.state != JobState.RUNNING:
                results.append(ControlResult(job, "unchanged", f"not running ({job.status})"))
                continue
            if job.request == Request.CANCEL:   # its end will be a cancel whatever is asked after
                results.append(ControlResult(job, "unchanged", "being cancelled"))
                continue
            try:
                [job] = self.store.apply([Change(job.id, JobState.RUNNING, None, "", self.clock.now(),
                                                 {"request": Request.REQUEUE})])
                results.append(ControlResult(job, "requeueing", "SIGTERM asked for; it keeps its place in the queue"))
            except Conflict:  # it ended meanwhile
                job = self.store.get(job.id)
                results.append(ControlResult(job, "unchanged", f"not running ({job.status})"))
        self._wake(job.id for job in jobs)
        return results

    def step(self, action: str, refs: list[str], pages: GroupPages, *, until: float, after: Position | None = None,
             allow: Callable[[list[JobRecord]], None] = lambda jobs: None,
             caller: str | None = None) -> ControlStep:
        """Part of cancel, hold, release or requeue (STEPPED), for a caller with
        a deadline (the API: 29 s and 6 MB an answer, an array 100,000 tasks):
        the jobs from `after` on, SLICE at a time, each slice read just before
        it is written, paced at the store's write rate (`admissions`), until
        the work for the time to `until` is done or `until` passes; at least
        one slice, so every step moves on. The next step goes on from the
        answer's `next`. Each change is guarded on the job as read, so a step
        repeated, or one that died between any two writes, changes nothing
        twice: a job it changed already is `unchanged` the next time.
        The first step (no `after`) decides a group still being admitted, and
        reads the first job of every ref before anything changes: `allow` (who
        may) is asked about those and then about each slice before it is
        written, and a job named on its own must be one the action applies to,
        as in the methods above."""
        if action not in STEPPED:
            raise ValueError(f"no bounded step for {action!r}")
        now = self.clock.now()
        decide: Decide
        if action == "cancel":
            expect, to, decide = PENDING_HERE, Transition(JobState.CANCELLED, now, CANCELLED_BY_USER), _cancel
        elif action == "hold":
            why = held_by(caller) if caller else HELD_BY_USER
            expect, to = frozenset({JobState.QUEUED}), Transition(JobState.HELD, now, why)
            decide = lambda job, at: _hold(job, at, why)  # noqa: E731
        elif action == "release":
            why = f"released by {caller}" if caller else RELEASED_BY_USER
            expect, to = frozenset({JobState.HELD}), Transition(JobState.QUEUED, now, why)
            decide = lambda job, at: _release(job, at, why)  # noqa: E731
        else:
            expect, to, decide = frozenset(), Transition(JobState.QUEUED, now, ""), _requeue
        if after is None:
            decided = self._decide_admitting(refs, expect, to) if expect else set()
            self._check_named(action, refs, pages, decided, allow)
            after = Position(0)
        if not 0 <= after.ref <= len(refs):
            raise SpecError(f"a step of {len(refs)} refs cannot go on at ref {after.ref}")
        ref, last = after.ref, after.after
        results: list[ControlResult] = []
        touched: list[str] = []
        seen: set[str] = set()
        slots: Iterator[list[JobRecord]] | None = None   # this step's slices, paced, once a task's size is known
        while ref < len(refs):
            want = SLICE
            if slots is not None:
                slot = next(slots, None)
                if slot is None or self.clock.now() >= until:
                    break
                want = len(slot)
            jobs = self._page(pages, refs, ref, last, want)
            if jobs is None:
                ref, last = ref + 1, None
                continue
            if slots is None:   # the first slice is now; the step writes what its time holds of tasks like it
                tasks = self.admissions.chunk(jobs[0], until - now) if self.admissions else CHUNK
                slots = iter(self.admissions.pace([jobs[0]] * tasks) if self.admissions else
                             ([jobs[0]] * SLICE for _ in range(0, tasks, SLICE)))
                next(slots)
            last = jobs[-1].id
            fresh = [job for job in jobs if job.id not in seen]   # a job two refs name: once a step
            seen.update(job.id for job in fresh)
            allow(fresh)
            results += self._carry_out(fresh, decide, wake=False)
            touched += [job.id for job in fresh]
            if len(jobs) < want:
                ref, last = ref + 1, None
        self._wake(touched)
        return ControlStep(results, Position(ref, last) if ref < len(refs) else None)

    @staticmethod
    def _page(pages: GroupPages, refs: list[str], ref: int, after: str | None, limit: int) -> list[JobRecord] | None:
        """The next `limit` jobs of refs[ref] after `after`; None when it has none left (or never had:
        a group being admitted with none written yet, checked by the first step)."""
        try:
            jobs = pages.group_page(refs[ref], after, limit)
        except NotFound:
            return None
        return jobs or None

    def _check_named(self, action: str, refs: list[str], pages: GroupPages, admitting: Set[str],
                     allow: Callable[[list[JobRecord]], None]) -> None:
        """Before a stepped change writes anything: each ref's first job (a group's
        tasks are one submission's: one owner) may be changed by the caller, and a
        job named on its own is one the action applies to."""
        firsts = []
        for ref in dict.fromkeys(refs):
            try:
                firsts += pages.group_page(ref, None, 1)
            except NotFound as exc:
                if ref not in admitting:
                    raise lookup.not_found(self.store, ref, exc) from None
        allow(firsts)
        for job in self._named(refs, firsts):
            if action == "hold" and job.state not in (JobState.QUEUED, JobState.HELD):
                raise InvalidTransition(_not_pending(job, "held"))
            if action == "release" and job.state.terminal:
                raise InvalidTransition(f"job {job.id} already {job.status}; only a held job can be released")
            if action == "requeue":
                _check_requeue(job)

    def approve(self, refs: list[str], *, caller: str | None = None) -> list[ControlResult]:
        return self._decide(refs, JobState.QUEUED, f"approved by {caller or 'an approver'}", "approved")

    def deny(self, refs: list[str], *, caller: str | None = None, reason: str = "") -> list[ControlResult]:
        # shown raw in every user's status, history and top: no escape sequences or line breaks
        if not reason.isprintable() or len(reason) > MAX_REASON:
            raise SpecError(f"--reason must be one line of printable text of at most {MAX_REASON} characters, "
                            f"got {len(reason):,}: {shown(reason)}")
        why = f"denied by {caller or 'an approver'}" + (f": {reason}" if reason else "")
        return self._decide(refs, JobState.REJECTED, why, "denied")

    def _decide(self, refs: list[str], to: JobState, why: str, action: str) -> list[ControlResult]:
        decided = self._decide_admitting(refs, frozenset({JobState.PENDING_APPROVAL}),
                                         Transition(to, self.clock.now(), why))
        jobs = self._resolve(refs, decided)
        alone = len(refs) == 1 and len(jobs) == 1   # a job asked about alone must await approval
        if alone and jobs[0].state != JobState.PENDING_APPROVAL:
            raise InvalidTransition(_not_awaiting(jobs[0]))
        now = self.clock.now()
        fields = {"ended_at": now} if to == JobState.REJECTED else None
        results = []
        for job in jobs:
            if job.state != JobState.PENDING_APPROVAL:
                results.append(ControlResult(job, "unchanged", f"not awaiting approval ({job.status})"))
                continue
            try:
                [job] = self.store.apply([Change(job.id, JobState.PENDING_APPROVAL, to, why, now, fields)])
                results.append(ControlResult(job, action))
            except Conflict:  # decided or cancelled meanwhile
                job = self.store.get(job.id)
                if alone:     # as if it had been read after: the loser of two approvers hears what a later one does
                    raise InvalidTransition(_not_awaiting(job)) from None
                results.append(ControlResult(job, "unchanged", f"not awaiting approval ({job.status})"))
        self._wake(job.id for job in jobs)
        return results

    def _carry_out(self, jobs: list[JobRecord], decide: Decide, *, wake: bool = True) -> list[ControlResult]:
        """Each job as `decide` says, written CHUNK jobs per transaction, each
        guarded on the state read; a job that moved meanwhile (e.g. QUEUED ->
        STARTING) is read again and decided again. The results in the jobs'
        order; the jobs written are named to the dispatcher (`wake`: here)."""
        results: dict[str, ControlResult] = {}
        todo = jobs
        for _ in range(3):
            now = self.clock.now()
            planned: list[tuple[Change, ControlResult]] = []
            for job in todo:
                change, result = decide(job, now)
                if change is None:
                    results[job.id] = result
                else:
                    planned.append((change, result))
            moved = []
            for start in range(0, len(planned), CHUNK):
                chunk = planned[start:start + CHUNK]
                for ok, (change, result) in zip(self.store.apply_each([c for c, _ in chunk]), chunk):
                    if ok:
                        results[change.job_id] = result
                    else:
                        moved.append(change.job_id)
            todo = self._reread(moved)
            if not todo:
                break
        else:
            raise Conflict(f"job {todo[0].id} kept changing state; try again")
        if wake:
            self._wake(job.id for job in jobs)
        return [results[job.id] for job in jobs if job.id in results]

    @staticmethod
    def _named(refs: list[str], jobs: list[JobRecord]) -> list[JobRecord]:
        """The jobs named on their own (a job id, not an array's)."""
        named = set(refs)
        return [job for job in jobs if job.id in named]

    def _decide_admitting(self, refs: list[str], expect: frozenset[JobState], decision: Transition) -> set[str]:
        """The groups named whose tasks not admitted yet will be written as
        `decision` says. Recorded before the group's jobs are read, so a
        chunk written meanwhile is either read here or written as decided."""
        if self.admissions is None:
            return set()
        return {ref for ref in dict.fromkeys(refs) if "_" not in ref and self.admissions.decide(ref, expect, decision)}

    def _resolve(self, refs: list[str], admitting: Set[str] = frozenset()) -> list[JobRecord]:
        """The jobs named, each once, without their history (an array may have
        100,000 tasks). Who may act on them is gqa.services.access's rule,
        checked by the entry point on these same jobs before any is changed.
        A group in `admitting` may have none written yet."""
        jobs: list[JobRecord] = []
        seen = set()
        for ref in refs:
            try:
                found = self.store.resolve(ref, history=False)
            except NotFound as exc:
                if ref in admitting:
                    continue
                raise lookup.not_found(self.store, ref, exc) from None
            for job in found:
                if job.id not in seen:
                    seen.add(job.id)
                    jobs.append(job)
        return jobs

    def _reread(self, job_ids: list[str]) -> list[JobRecord]:
        """These jobs as they are now; one that is gone is left out."""
        jobs = []
        for job_id in job_ids:
            try:
                jobs.append(with_changes(self.store.get(job_id), history=()))
            except NotFound:
                pass
        return jobs

    def _wake(self, jobs: Iterable[str]) -> None:
        if self.waker is not None:
            self.waker.wake(list(jobs))   # named: the pass reads them from the table, whatever the index's lag


def _cancel(job: JobRecord, now: float) -> tuple[Change | None, ControlResult]:
    """The change that cancels the job as read, and the result once it applied
    (the job as changed, without its history); no change where none is needed."""
    if job.state.terminal:
        return None, ControlResult(job, "unchanged", f"already {job.status}")
    if job.state.active:
        if job.request == Request.CANCEL:
            return None, ControlResult(job, "cancelling", "already being cancelled")
        fields: dict[str, Any] = {"request": Request.CANCEL}
        return (Change(job.id, job.state, None, "", now, fields),
                ControlResult(with_changes(job, **fields), "cancelling", "stopping its processes"))
    fields = {"ended_at": now, "not_before": None}
    return (Change(job.id, job.state, JobState.CANCELLED, CANCELLED_BY_USER, now, fields),
            ControlResult(with_changes(job, state=JobState.CANCELLED, reason=CANCELLED_BY_USER, **fields), "cancelled"))


def _not_awaiting(job: JobRecord) -> str:
    return f"job {job.id} is {job.status}, not awaiting approval"


def _check_requeue(job: JobRecord) -> None:
    """A job named on its own must be running, or back in the queue after running (a requeue
    asked again: unchanged); one that never started has nothing to requeue."""
    if job.state in (JobState.QUEUED, JobState.RETRY_WAIT) and not job.attempts:
        raise InvalidTransition(f"job {job.id} has not started ({job.status}); only a running job can be requeued")
    if job.state not in (JobState.RUNNING, JobState.QUEUED, JobState.RETRY_WAIT):
        raise InvalidTransition(f"job {job.id} is {job.status}; only a running job can be requeued")
    if job.request == Request.CANCEL:
        raise InvalidTransition(f"job {job.id} is being cancelled; a cancelled job cannot be requeued")


def _requeue(job: JobRecord, now: float) -> tuple[Change | None, ControlResult]:
    if job.state != JobState.RUNNING:
        return None, ControlResult(job, "unchanged", f"not running ({job.status})")
    if job.request == Request.CANCEL:   # its end will be a cancel whatever is asked after
        return None, ControlResult(job, "unchanged", "being cancelled")
    fields: dict[str, Any] = {"request": Request.REQUEUE}
    return (Change(job.id, job.state, None, "", now, fields), ControlResult(
        with_changes(job, **fields), "requeueing", "SIGTERM asked for; it keeps its place in the queue"))


def _hold(job: JobRecord, now: float, why: str) -> tuple[Change | None, ControlResult]:
    if job.state == JobState.QUEUED:
        fields: dict[str, Any] = {"user_hold": True}
        return (Change(job.id, job.state, JobState.HELD, why, now, fields),
                ControlResult(with_changes(job, state=JobState.HELD, reason=why, **fields), "held"))
    if job.state == JobState.HELD and job.user_hold:
        return None, ControlResult(job, "unchanged", "already held")
    if job.state == JobState.HELD:     # held by its team's budget: now by its owner too
        fields = {"user_hold": True}
        return (Change(job.id, job.state, None, "", now, fields),
                ControlResult(with_changes(job, **fields), "held", "its team's budget holds it too"))
    return None, ControlResult(job, "unchanged", f"not pending ({job.status})")


def _release(job: JobRecord, now: float, why: str) -> tuple[Change | None, ControlResult]:
    if job.state == JobState.HELD and job.user_hold:
        fields: dict[str, Any] = {"user_hold": False}
        return (Change(job.id, job.state, JobState.QUEUED, why, now, fields),
                ControlResult(with_changes(job, state=JobState.QUEUED, reason=why, **fields), "released"))
    if job.state == JobState.HELD:
        return None, ControlResult(job, "unchanged", "held by its team's budget, not by a user: it is released "
                                                     "when the budget allows")
    return None, ControlResult(job, "unchanged", f"not held ({job.status})")


def _not_pending(job: JobRecord, done: str) -> str:
    """Why a job named on its own cannot be held or updated, and what can be done instead."""
    if job.state.terminal:
        return f"job {job.id} already {job.status}; only a pending job can be {done}"
    if job.state.active:
        return (f"job {job.id} is {job.status}; only a pending job can be {done} "
                f"(gqa cancel {job.id} stops it, gqa requeue {job.id} sends it back to the queue)")
    if job.state == JobState.PENDING_APPROVAL:
        return (f"job {job.id} is awaiting approval; only a queued or held job can be {done} "
                f"(an approver decides first; gqa cancel {job.id} withdraws it)")
    return f"job {job.id} is {job.status}; only a queued or held job can be {done} (try again once it is queued)"


__all__ = ["ControlService", "ControlResult", "ControlStep", "GqaError", "Position"]
