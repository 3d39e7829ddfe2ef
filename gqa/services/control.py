"""What users do to jobs that exist: cancel, requeue. A job that holds no
process changes state here at once; a running one gets a request that the
supervisor carries out (SIGTERM, grace, SIGKILL) and settles on exit."""

from dataclasses import dataclass

from ..models.errors import Conflict, GqaError, InvalidTransition
from ..models.job import JobRecord, JobState, Request
from ..ports import Change, Clock, JobStore, Waker


@dataclass(frozen=True)
class ControlResult:
    job: JobRecord
    action: str          # "cancelled", "cancelling", "requeued", "requeueing", "unchanged"
    detail: str = ""


class ControlService:
    def __init__(self, store: JobStore, clock: Clock, waker: Waker | None = None):
        self.store, self.clock, self.waker = store, clock, waker

    def cancel(self, refs: list[str]) -> list[ControlResult]:
        jobs = self._resolve(refs)
        results = [self._cancel_one(job) for job in jobs]
        self._wake()
        return results

    def _cancel_one(self, job: JobRecord) -> ControlResult:
        for _ in range(3):  # the state may move under us (e.g. QUEUED -> STARTING); re-read and retry
            now = self.clock.now()
            if job.state.terminal:
                return ControlResult(job, "unchanged", f"already {job.status}")
            try:
                if job.state.active:
                    if job.request == Request.CANCEL:
                        return ControlResult(job, "cancelling", "already being cancelled")
                    [job] = self.store.apply([Change(job.id, job.state, None, "", now, {"request": Request.CANCEL})])
                    return ControlResult(job, "cancelling", "stopping its processes")
                [job] = self.store.apply([Change(job.id, job.state, JobState.CANCELLED, "cancelled by user", now,
                                                 {"ended_at": now, "not_before": None})])
                return ControlResult(job, "cancelled")
            except Conflict:
                job = self.store.get(job.id)
        raise Conflict(f"job {job.id} kept changing state; try again")

    def requeue(self, refs: list[str]) -> list[ControlResult]:
        """Requeue running jobs. A job named on its own must be running (checked
        before anything changes); in an array, tasks not running are left as they are."""
        jobs = self._resolve(refs)
        singles = {ref for ref in refs if len(self.store.resolve(ref)) == 1}
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
        self._wake()
        return results

    def approve(self, refs: list[str], *, caller: str | None = None) -> list[ControlResult]:
        return self._decide(refs, JobState.QUEUED, f"approved by {caller or 'an approver'}", "approved")

    def deny(self, refs: list[str], *, caller: str | None = None, reason: str = "") -> list[ControlResult]:
        why = f"denied by {caller or 'an approver'}" + (f": {reason}" if reason else "")
        return self._decide(refs, JobState.REJECTED, why, "denied")

    def _decide(self, refs: list[str], to: JobState, why: str, action: str) -> list[ControlResult]:
        jobs = self._resolve(refs)
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
        self._wake()
        return results

    def _resolve(self, refs: list[str]) -> list[JobRecord]:
        """The jobs named, each once. Who may act on them is gqa.services.access's
        rule, checked by the entry point on these same jobs before any is changed."""
        jobs: list[JobRecord] = []
        seen = set()
        for ref in refs:
            for job in self.store.resolve(ref):
                if job.id not in seen:
                    seen.add(job.id)
                    jobs.append(job)
        return jobs

    def _wake(self) -> None:
        if self.waker is not None:
            self.waker.wake()


__all__ = ["ControlService", "ControlResult", "GqaError"]
