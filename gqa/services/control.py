"""What users do to jobs that exist: cancel, requeue. A job that holds no
process changes state here at once; a running one gets a request that the
supervisor carries out (SIGTERM, grace, SIGKILL) and settles on exit."""

from collections.abc import Iterable, Set
from dataclasses import dataclass, replace
from typing import Any

from ..models.errors import Conflict, GqaError, InvalidTransition, NotFound
from ..models.job import JobRecord, JobState, Request, Transition
from ..ports import Admissions, Change, Clock, JobRecords, Waker


CHUNK = 5000    # jobs cancelled per transaction: a 100,000-task array never holds the store for long
CANCELLED_BY_USER = "cancelled by user"


@dataclass(frozen=True)
class ControlResult:
    job: JobRecord
    action: str          # "cancelled", "cancelling", "requeued", "requeueing", "unchanged"
    detail: str = ""


class ControlService:
    def __init__(self, store: JobRecords, clock: Clock, waker: Waker | None = None,
                 admissions: Admissions | None = None):
        """`admissions`: where a large array still being admitted in chunks
        (AWS, services/chunked.py) is told what was decided on the whole group,
        so the tasks not written yet are written as decided."""
        self.store, self.clock, self.waker = store, clock, waker
        self.admissions = admissions

    def cancel(self, refs: list[str]) -> list[ControlResult]:
        """Cancel the jobs named, whole arrays at once: jobs that hold no process
        end here, running ones get the request the supervisor carries out.
        Written CHUNK jobs per transaction, each guarded on the state read; a
        job that moved meanwhile is read again and decided again."""
        results: dict[str, ControlResult] = {}
        decided = self._decide_admitting(refs, frozenset({JobState.QUEUED, JobState.PENDING_APPROVAL}),
                                         Transition(JobState.CANCELLED, self.clock.now(), CANCELLED_BY_USER))
        jobs = self._resolve(refs, decided)
        todo = jobs
        for _ in range(3):  # the state may move under us (e.g. QUEUED -> STARTING); re-read and retry
            now = self.clock.now()
            planned: list[tuple[Change, ControlResult]] = []
            for job in todo:
                change, result = _cancel(job, now)
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
        self._wake(job.id for job in jobs)
        return [results[job.id] for job in jobs if job.id in results]

    def requeue(self, refs: list[str]) -> list[ControlResult]:
        """Requeue running jobs. A job named on its own must be running (checked
        before anything changes); in an array, tasks not running are left as they are."""
        jobs = self._resolve(refs)
        singles = {ref for ref in refs if len(self.store.resolve(ref, history=False)) == 1}
        for job in jobs:
            if job.id in singles and job.state not in (JobState.RUNNING, JobState.QUEUED, JobState.RETRY_WAIT):
                raise InvalidTransition(f"job {job.id} is {job.status}; only a running job can be requeued")
        results = []
        for job in jobs:
            if job.state != JobState.RUNNING:
                results.append(ControlResult(job, "unchanged", f"not running ({job.status})"))
                continue
            try:
                [job] = self.store.apply([Change(job.id, JobState.RUNNING, None, "", self.clock.now(),
                                                 {"request": Request.REQUEUE})])
                results.append(ControlResult(job, "requeueing", "SIGTERM sent; it keeps its place in the queue"))
            except Conflict:  # it ended meanwhile
                job = self.store.get(job.id)
                results.append(ControlResult(job, "unchanged", f"not running ({job.status})"))
        self._wake(job.id for job in jobs)
        return results

    def approve(self, refs: list[str], *, caller: str | None = None) -> list[ControlResult]:
        return self._decide(refs, JobState.QUEUED, f"approved by {caller or 'an approver'}", "approved")

    def deny(self, refs: list[str], *, caller: str | None = None, reason: str = "") -> list[ControlResult]:
        why = f"denied by {caller or 'an approver'}" + (f": {reason}" if reason else "")
        return self._decide(refs, JobState.REJECTED, why, "denied")

    def _decide(self, refs: list[str], to: JobState, why: str, action: str) -> list[ControlResult]:
        decided = self._decide_admitting(refs, frozenset({JobState.PENDING_APPROVAL}),
                                         Transition(to, self.clock.now(), why))
        jobs = self._resolve(refs, decided)
        waiting = [j for j in jobs if j.state == JobState.PENDING_APPROVAL]
        if len(refs) == 1 and len(jobs) == 1 and not waiting:
            raise InvalidTransition(f"job {jobs[0].id} is {jobs[0].status}, not awaiting approval")
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
            except Conflict:  # cancelled meanwhile
                job = self.store.get(job.id)
                results.append(ControlResult(job, "unchanged", f"not awaiting approval ({job.status})"))
        self._wake(job.id for job in jobs)
        return results

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
            except NotFound:
                if ref in admitting:
                    continue
                raise
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
                jobs.append(replace(self.store.get(job_id), history=()))
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
                ControlResult(replace(job, **fields), "cancelling", "stopping its processes"))
    fields = {"ended_at": now, "not_before": None}
    return (Change(job.id, job.state, JobState.CANCELLED, CANCELLED_BY_USER, now, fields),
            ControlResult(replace(job, state=JobState.CANCELLED, reason=CANCELLED_BY_USER, **fields), "cancelled"))


__all__ = ["ControlService", "ControlResult", "GqaError"]
