"""What users do to jobs that exist: cancel, requeue. A job that holds no
process changes state here at once; a running one gets a request that the
supervisor carries out (SIGTERM, grace, SIGKILL) and settles on exit."""

from dataclasses import dataclass

from ..models.errors import Conflict, GqaError, InvalidTransition, NotPermitted
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

    def cancel(self, refs: list[str], *, caller: str | None = None, admin: bool = True) -> list[ControlResult]:
        jobs = self._resolve(refs)
        results = [self._cancel_one(job, caller, admin) for job in jobs]
        self._wake()
        return results

    def _cancel_one(self, job: JobRecord, caller: str | None, admin: bool) -> ControlResult:
        _check_owner(job, caller, admin, "cancel")
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

    def requeue(self, refs: list[str], *, caller: str | None = None, admin: bool = True) -> list[ControlResult]:
        results = []
        for job in self._resolve(refs):
            _check_owner(job, caller, admin, "requeue")
            if job.state == JobState.RUNNING:
                now = self.clock.now()
                try:
                    [job] = self.store.apply([Change(job.id, JobState.RUNNING, None, "", now,
                                                     {"request": Request.REQUEUE})])
                except Conflict:
                    job = self.store.get(job.id)
                    raise InvalidTransition(f"job {job.id} is {job.status} now; only a running job can be requeued")
                results.append(ControlResult(job, "requeueing", "SIGTERM sent; it keeps its place in the queue"))
            elif job.state in (JobState.QUEUED, JobState.RETRY_WAIT):
                results.append(ControlResult(job, "unchanged", f"already waiting ({job.status})"))
            else:
                raise InvalidTransition(f"job {job.id} is {job.status}; only a running job can be requeued")
        self._wake()
        return results

    def _resolve(self, refs: list[str]) -> list[JobRecord]:
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


def _check_owner(job: JobRecord, caller: str | None, admin: bool, verb: str) -> None:
    if not admin and caller is not None and caller != job.owner:
        raise NotPermitted(f"job {job.id} belongs to {job.owner}; {caller} may not {verb} it")


__all__ = ["ControlService", "ControlResult", "GqaError"]
