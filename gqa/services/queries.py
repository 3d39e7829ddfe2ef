"""Read-only views for `gqa queue` and `gqa status`: the pending jobs in the
order they are predicted to start, with positions, reasons and ETAs, and a
launched job's wait for its backend to start it, with the numbers.

One order: a pending job's position is its place in the predicted start
order (scheduling/eta.py: the pass run forward, fair share updated as jobs
start), so two teams' bursts are listed interleaved as they will start; the
jobs the replay cannot place (an unmet dependency, a hold, no known end
ahead, or past ETA_DEPTH) follow in the current pass's ranking. `gqa queue`
and `gqa status` both read it here."""

from dataclasses import dataclass

from ..models.accounting import so_far
from ..models.errors import NotAdmitted, NotFound
from ..models.job import PENDING, JobRecord, JobState, group_of
from ..models.records import with_changes
from ..ports import Admissions, Clock, JobStore
from ..scheduling import plan
from ..scheduling.dependencies import at_gate, gate
from ..scheduling.snapshot import Factors, Snapshot, Weights
from ..scheduling.eta import longest_runs, predict_starts
from . import lookup
from .launched import awaiting_start, waiting_reason
from .settle import hourly_rate
from .snapshot import (RatiosInUse, dependency_states, ratios_as_they_are, read_snapshot, start_times, team_bands,
                       team_ratios, team_samples, team_shares)


# starts the replay tells: past them a job's ETA is not told, and its position follows the ranking
# (as Slurm's backfill tests 500 jobs by default); 10,000 pending jobs list in well under a second
ETA_DEPTH = 500


@dataclass(frozen=True)
class QueueEntry:
    job: JobRecord
    position: int | None          # 1 = next to start; None for jobs not in the running order
    reason: str
    factors: Factors | None = None
    eta: float | None = None      # predicted start (epoch seconds); None when it cannot be told


@dataclass(frozen=True)
class QueueView:
    pending: list[QueueEntry]
    running: list[JobRecord]
    total_gpus: int
    free_gpus: int                   # of total_gpus, those no job holds
    weights: Weights | None = None   # how the factors add up to the score
    outside_gpus: int = 0            # held by jobs started before the inventory shrank, not among total_gpus


class QueryService:
    def __init__(self, store: JobStore, clock: Clock, admissions: Admissions | None = None,
                 ratios: RatiosInUse | None = None):
        """`admissions`: how far large arrays admitted in chunks have got (AWS). `ratios`: the
        teams' run-time ratios a dispatcher beside it plans by, given those the samples give
        (the local daemon's `Supervisor.ratios_in_use`), so the queue shows what its passes do."""
        self.store, self.clock, self.admissions = store, clock, admissions
        self.ratios = ratios or ratios_as_they_are

    def queue(self, *, group: str | None = None) -> QueueView:
        """The queue; `group`: only this array or sweep, or this one job (an id)."""
        samples = team_samples(self.store)
        # the rows shown and the pass that places them from one state of the store: read apart, while
        # short jobs churn, positions skipped jobs started since and free GPUs counted jobs ended since
        listing = self.store.queue_listing()
        snap = read_snapshot(self.store, self.clock.now(), self.ratios(team_ratios(samples), team_bands(samples)),
                             view=(listing.pending, listing.running))
        decision = plan(snap)
        etas = predict_starts(snap, shares=team_shares(samples), longest=longest_runs(samples), most=ETA_DEPTH)
        by_id = {j.id: j for j in listing.records if j.state in PENDING}
        starting = {s.job_id for s in decision.starts}
        # predicted starts first, in their order; then the rest in this pass's ranking
        order = [job_id for job_id, eta in etas.items() if eta is not None]
        told = set(order)
        order += [job_id for job_id in decision.order if job_id not in told]
        pending = []
        for position, job_id in enumerate(order, start=1):
            job = by_id.get(job_id)
            if job is None:
                continue
            reason = "starting now" if job_id in starting else decision.waiting.get(job_id, "")
            pending.append(QueueEntry(job, position, reason, decision.factors.get(job_id), etas.get(job_id)))
        ordered = set(decision.order)
        for job in by_id.values():   # not yet schedulable: retry backoff, awaiting approval
            if job.id not in ordered and job.state != JobState.QUEUED:
                pending.append(QueueEntry(job, None, _not_queued_reason(job, snap.now)))
        # launched jobs' waits are told from their claim, in their history (left out of the answer)
        claimed = [with_changes(j, history=()) for j in self._as_seen(
            [j for j in listing.records if j.state == JobState.STARTING], snap.now)]
        running = sorted(claimed + [j for j in listing.records if j.state == JobState.RUNNING], key=lambda j: j.seq)
        if group is not None:
            pending = [e for e in pending if group in (e.job.group, e.job.id)]
            running = [j for j in running if group in (j.group, j.id)]
        # a daemon restarted with fewer GPUs adopts the jobs still on the others: they hold those until they
        # end, and are counted apart, not against the GPUs the queue has now
        inventory = {g.index for g in snap.gpus}
        held = {i for r in snap.running for i in r.gpus}
        return QueueView(pending, running, len(snap.gpus), len(inventory - held), snap.policy.weights,
                         outside_gpus=len(held - inventory))

    def jobs(self, ref: str, *, history: bool = True) -> list[JobRecord]:
        """A job or a group's jobs; NotAdmitted for ids accepted but not recorded yet (lookup.py),
        a task of an array still being admitted in chunks among them. history=False: without their
        transitions, which `gqa wait` polls do not show (half the read of a large array)."""
        try:
            now = self.clock.now()
            jobs = lookup.resolve(self.store, ref, history=history)
            return self._so_far(self._gated(self._as_seen(jobs, now, whole=history), now), now)
        except NotFound:
            left = self.admitting(group_of(ref))
            if not left:
                raise
        raise NotAdmitted(f"job {ref} is not admitted yet: its array has {left} tasks still being admitted, "
                          "a chunk at a time; try again in a minute")

    def jobs_and_admitting(self, ref: str) -> tuple[list[JobRecord], int]:
        """jobs(ref), and how many more of its tasks are still being admitted."""
        return self.jobs(ref), self.admitting(ref)

    def admitting(self, ref: str) -> int:
        """How many tasks of group `ref` are accepted and not written yet (0 for a job id)."""
        if self.admissions is None or "_" in ref:
            return 0
        progress = self.admissions.progress(ref)
        return progress.remaining if progress is not None else 0

    def _so_far(self, jobs: list[JobRecord], now: float) -> list[JobRecord]:
        """The jobs with a running attempt's GPU-seconds and cost so far counted in, at its GPUs'
        price, as `gqa cost` and `gqa history` count them (a record holds its ended attempts')."""
        if not any(j.state == JobState.RUNNING for j in jobs):
            return jobs
        inventory = self.store.inventory()

        def counted(job: JobRecord) -> JobRecord:
            used, spent = so_far(job, now, hourly=hourly_rate(job, inventory))
            return with_changes(job, gpu_seconds=job.gpu_seconds + used, cost=job.cost + spent)
        return [counted(j) if j.state == JobState.RUNNING else j for j in jobs]

    def _gated(self, jobs: list[JobRecord], now: float) -> list[JobRecord]:
        """Pending jobs that wait for their owner's release, their --begin time or
        their dependency, with the reason the pass gives (scheduling/dependencies.py)."""
        if not any(j.state in (JobState.QUEUED, JobState.HELD) and at_gate(j, now) for j in jobs):
            return jobs
        pending, running = self.store.scheduling_view()
        named = dependency_states(self.store, pending)
        gated = gate(Snapshot(now=now, gpus=(), pending=tuple(pending), running=tuple(running),
                              named=named, started=start_times(self.store, pending, named)))
        return [with_changes(j, reason=gated.reason(j.id)) if j.id in gated else j for j in jobs]

    def _as_seen(self, jobs: list[JobRecord], now: float, *, whole: bool = True) -> list[JobRecord]:
        """The jobs with their reasons as of now: a launched job's wait for its backend, in minutes,
        timed from the claim in its history (read for these jobs alone where the rest were read
        without: `whole` False)."""
        if not any(awaiting_start(j) for j in jobs):
            return jobs
        inventory = self.store.inventory()

        def seen(job: JobRecord) -> JobRecord:
            timed = job if whole else self.store.get(job.id)
            return with_changes(job, reason=waiting_reason(timed, inventory, now))
        return [seen(j) if awaiting_start(j) else j for j in jobs]


def _not_queued_reason(job: JobRecord, now: float) -> str:
    if job.state == JobState.RETRY_WAIT and job.not_before is not None:
        from ..models.units import format_duration
        return f"{job.reason}; back in the queue in {format_duration(max(0.0, job.not_before - now))}"
    return job.reason
