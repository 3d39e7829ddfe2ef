"""Attempts whose end gqa never heard of: which to ask the backend about, and
what its answer does.

On AWS an attempt's end reaches gqa only as a Batch "Job State Change" event.
EventBridge may drop one, and the reconcile function's retries and failure
destination may lose it; the job would then stay RUNNING (or STARTING with a
Batch job) and hold its GPUs for good. So the dispatcher's scheduled passes
ask Batch about attempts that have been quiet for a while:

- which: jobs RUNNING, or STARTING with a recorded Batch job (launched and
  waiting for Batch to start it: one whose RUNNING event was lost would
  otherwise wait forever), whose record has not changed for `quiet` seconds
  and that were not asked about in the last `quiet` seconds; the longest
  unasked first, at most `limit` a pass. At the default hundred that is one
  DescribeJobs call at most per pass, and each attempt is asked about at
  most once per `quiet` (a job waiting hours for capacity, once per `quiet`
  while Batch keeps it queued); an attempt that ends normally is settled by
  its event first and never asked about;
- what then: Batch's answer is the event Batch would have sent, and goes
  through the reconcile service as that event would have (one rule, not
  two): an ended attempt is settled, charged from Batch's startedAt to its
  stoppedAt (nothing if it never started); a start whose RUNNING event was
  lost is recorded from Batch's startedAt. An attempt Batch no longer knows
  is lost infrastructure: back to the queue, resumed from its checkpoint,
  not counted as an error. A real event that arrives afterwards finds the
  attempt settled and changes nothing.

Asking early costs a call but can do no harm: Batch's answer is the truth the
event would have carried. The quiet time also keeps a job submitted a moment
ago (which Batch may not list yet) from being taken for lost.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..models.batch_events import RUNNING, BatchJobEvent
from ..models.errors import BackendUnavailable, Conflict, NotFound
from ..models.job import JobRecord, JobState, id_order
from ..ports import AttemptStatus, Clock, JobRecords
from .reconcile import Action, ReconcileService, Reconciled, late_start

log = logging.getLogger("gqa.overdue")
S = JobState
QUIET = 600.0      # seconds without news before an attempt is asked about (and between two asks)
PER_PASS = 100     # attempts asked about per pass: DescribeJobs takes a hundred ids a call
NEVER = float("-inf")


def last_news(job: JobRecord) -> float | None:
    """When the job's record last changed state (None without its history)."""
    return job.history[-1].at if job.history else None


def overdue(jobs: Iterable[JobRecord], now: float, asked: Mapping[str, float], *, quiet: float = QUIET,
            limit: int = PER_PASS) -> list[JobRecord]:
    """The jobs whose recorded attempt the backend should be asked about now:
    open with a recorded launch, quiet for `quiet` seconds, not asked about
    (`asked`: job id -> when) within `quiet`; the longest unasked first, then
    the longest quiet, at most `limit`."""
    due = []
    for job in jobs:
        if job.state not in (S.STARTING, S.RUNNING) or not job.proc_token:
            continue
        news = last_news(job)
        if (news is not None and now - news < quiet) or now - asked.get(job.id, NEVER) < quiet:
            continue
        due.append(job)
    due.sort(key=lambda j: (asked.get(j.id, NEVER), last_news(j) or NEVER, id_order(j.id)))
    return due[:max(0, limit)]


def news_in(job: JobRecord, event: BatchJobEvent) -> bool:
    """Does the backend's answer tell the record something (then it is applied,
    at the cost of the read and write its event would have cost)? Not for an
    attempt still running as recorded, or still waiting in Batch's queue."""
    if event.ended:
        return True
    if event.status != RUNNING:
        return False
    return job.state == S.STARTING or late_start(job, event) is not None


@dataclass
class Checked:
    """What one check did, by job id."""

    asked: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)     # ended attempts whose end had not been recorded
    started: list[str] = field(default_factory=list)     # starts recorded (or corrected) from the answer
    lost: list[str] = field(default_factory=list)        # attempts the backend no longer knew: requeued
    settlements: list[Reconciled] = field(default_factory=list)   # what settling the settled and lost did

    @property
    def recovered(self) -> int:
        """Attempts whose lost news the answers made up for."""
        return len(self.settled) + len(self.started) + len(self.lost)


class OverdueCheck:
    """Run by the dispatcher's scheduled passes. `reconcile` applies the
    answers; it need not wake the dispatcher (the pass schedules right after).
    What was asked when is kept in memory: a fresh container may ask once more
    than needed, never less."""

    def __init__(self, store: JobRecords, attempts: AttemptStatus, reconcile: ReconcileService, clock: Clock, *,
                 quiet: float = QUIET, limit: int = PER_PASS):
        self.store, self.attempts, self.reconcile, self.clock = store, attempts, reconcile, clock
        self.quiet, self.limit = quiet, limit
        self._asked: dict[str, float] = {}

    def run(self) -> Checked:
        """Ask about the overdue attempts and apply the answers. A backend that
        cannot be asked, or a job that moves meanwhile, is left for the next pass."""
        checked = Checked()
        now = self.clock.now()
        live = self.store.list([S.STARTING, S.RUNNING], history=True)
        ids = {j.id for j in live}
        self._asked = {k: v for k, v in self._asked.items() if k in ids}   # only open attempts: stays small
        jobs = overdue(live, now, self._asked, quiet=self.quiet, limit=self.limit)
        if not jobs:
            return checked
        try:
            answers = self.attempts.attempts_now(jobs)
        except BackendUnavailable as exc:
            log.warning("could not ask the compute backend about %d quiet attempts: %s", len(jobs), exc)
            return checked
        for job in jobs:
            self._asked[job.id] = now
            checked.asked.append(job.id)
        for job in jobs:
            if job.id in answers:
                self._apply(job, answers[job.id], now, checked)
        return checked

    def _apply(self, job: JobRecord, event: BatchJobEvent | None, now: float, checked: Checked) -> None:
        try:
            if event is None:
                result = self.reconcile.forgotten(job.id, job.proc_token or "", job.attempts, now)
                kept = checked.lost
            elif news_in(job, event):
                result = self.reconcile.handle(event)
                kept = checked.settled if result.action == Action.SETTLED else checked.started
            else:
                return
        except (BackendUnavailable, Conflict, NotFound) as exc:
            self._asked.pop(job.id, None)    # ask again next pass
            log.warning("job %s: could not apply what the compute backend says of it: %s", job.id, exc)
            return
        if result.action != Action.IGNORED:
            kept.append(job.id)
            if result.action == Action.SETTLED:
                checked.settlements.append(result)
            log.warning("job %s: its attempt's news never came; the compute backend says: %s", job.id, result.reason)
