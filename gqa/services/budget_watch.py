"""The budget watch: one tick, on a schedule (the budget Lambda; any backend
whose ports are implemented). The rules are in gqa/scheduling/alerts.py;
this reads what they need, and carries out what they decide:

1. spend: settled attempts plus what running attempts have cost so far, per
   team, recorded as the live figure (rewritten each tick, never added to the
   settled spend, so nothing is counted twice);
2. queue: a team at or over its budget has its queued jobs HELD (the reason
   says the numbers) and, with stop_at_budget, its running jobs asked to
   requeue; held jobs the budget allows again are released; at most
   `holds_per_tick` holds and releases a tick, a write the store refuses
   logged, not raised, so the alerts after them still go (services/holding.py);
3. alerts: budget thresholds, jobs waiting too long (for GPUs, or for an
   approver: those go to the approvers, services/approvals.py), idle GPUs; each is
   claimed (a conditional write) before it is sent, so two overlapping ticks
   never send one twice, and released if sending fails, so a later tick
   sends it;
4. metrics: spend and budget used per team, queue age.

Stopping a job is a REQUEUE request, carried out by the dispatcher (which
holds the compute backend): the job gets SIGTERM, checkpoints, goes back to
the queue and is HELD there by the budget like any other queued job of its
team, so it resumes from its checkpoint once the budget allows. A cancel
would lose the job; a new kind of stop would need every backend's supervisor
to learn it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..models.errors import Conflict, GqaError, NotFound
from ..models.job import PENDING, JobRecord, JobState, Request
from ..ports import BudgetRecords, Change, Clock, GpuUtilization, JobStore, LiveSpend, Metrics, Notifier, Waker
from ..scheduling import plan
from ..scheduling.alerts import (Alert, Attempt, Waiting, budget_alerts, idle_alerts, idle_candidates, idle_key,
                                 pending_alerts, pending_key, queue_changes, team_spend, unsent)
from ..scheduling.budget import TeamSpend, period_of
from ..scheduling.dependencies import gate
from ..scheduling.snapshot import Snapshot
from .approvals import overdue_approvals
from .holding import moves, write_some
from .settle import hourly_rate
from .snapshot import dependency_states, read_snapshot

log = logging.getLogger("gqa.budget_watch")
LEASE = 900.0              # a claim outlives any tick (a Lambda runs 15 minutes at most)
PENDING_PER_TICK = 100     # jobs read for pending alerts per tick, oldest first: a huge sweep cannot stall a tick


@dataclass
class Tick:
    """What one tick saw and did."""

    period: str
    spend: dict[str, TeamSpend]
    held: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    sent: list[Alert] = field(default_factory=list)
    failed: list[Alert] = field(default_factory=list)     # claimed but not delivered: a later tick retries them


class BudgetWatch:
    def __init__(self, store: JobStore, records: BudgetRecords, notifier: Notifier, clock: Clock, *,
                 utilisation: GpuUtilization | None = None, metrics: Metrics | None = None,
                 waker: Waker | None = None, lease: float = LEASE, pending_per_tick: int = PENDING_PER_TICK,
                 holds_per_tick: int | None = None):
        """`holds_per_tick`: the most holds and releases a tick writes (None: all); the dispatcher's
        passes hold and release the same jobs, paced too, and start none the budget does not cover."""
        self.store, self.records, self.notifier, self.clock = store, records, notifier, clock
        self.utilisation, self.metrics, self.waker = utilisation, metrics, waker
        self.lease, self.pending_per_tick, self.holds_per_tick = lease, pending_per_tick, holds_per_tick

    def tick(self) -> Tick:
        now = self.clock.now()
        period = period_of(now)
        inventory, policy, teams = self.store.inventory(), self.store.policy(), self.store.teams()
        gpus = inventory.gpus if inventory else ()
        pending, running = self.store.scheduling_view()
        records = self.store.list([JobState.RUNNING])
        accrued: dict[str, float] = {}
        for job in records:
            if job.started_at is not None:
                accrued[job.team] = accrued.get(job.team, 0.0) + \
                    hourly_rate(job, inventory) * max(0.0, now - job.started_at) / 3600
        spend = team_spend(self.store.spend(period), accrued, teams, policy.default_team)
        self.records.record_spend(period, [LiveSpend(t, s.settled, s.running, now) for t, s in spend.items()])

        snap = Snapshot(now=now, gpus=gpus, pending=tuple(pending), running=tuple(running), teams=teams,
                        policy=policy, spend={t: s.spent for t, s in spend.items()},
                        named=dependency_states(self.store, pending))
        attempts = [_attempt(j) for j in records]
        tick = Tick(period, spend)
        self._change_queue(snap, spend, attempts, tick)

        alerts = budget_alerts(spend, policy.budget_alerts, period)
        alerts += self._idle(attempts, now, policy.idle_gpu_percent, policy.idle_gpu_window)
        waiting = self._waiting_candidates(snap, now, policy.alert_pending_after)
        approvals = self._awaiting_approval(now, policy.alert_pending_after)
        sent = self.records.sent({k for a in alerts + approvals for k in a.covered_by}
                                 | {pending_key(j) for j in waiting}, now)
        alerts += pending_alerts(self._waiting([j for j in waiting if pending_key(j) not in sent], now),
                                 now, policy.alert_pending_after)
        alerts += unsent(approvals, sent)[:self.pending_per_tick]
        for alert in unsent(alerts, sent):
            self._send(alert, now, tick)
        self._publish(tick, snap)
        return tick

    # -- the queue ------------------------------------------------------------------------------------
    def _change_queue(self, snap: Snapshot, spend: dict[str, TeamSpend], attempts: list[Attempt],
                      tick: Tick) -> None:
        decided = queue_changes(snap, spend, attempts)
        now = snap.now
        # at most holds_per_tick, in one write: a team's whole queue one job at a time outlasts the
        # function's timeout, and its alerts, after it, are never sent (services/holding.py)
        written = write_some(self.store, moves(decided.release, decided.hold, now), most=self.holds_per_tick)
        for job in written.jobs:
            (tick.held if job.state == JobState.HELD else tick.released).append(job.id)
        for job_id, reason in decided.stop.items():
            if self._apply(Change(job_id, JobState.RUNNING, None, reason, now, {"request": Request.REQUEUE})):
                tick.stopped.append(job_id)
                log.info("job %s: %s", job_id, reason)
        if (tick.released or tick.stopped) and self.waker is not None:
            try:
                # the dispatcher starts released jobs and carries out the stops now
                self.waker.wake(tick.released + tick.stopped)
            except GqaError as exc:
                log.warning("could not wake the dispatcher: %s", exc)

    def _apply(self, change: Change) -> bool:
        """One job at a time: a job that moved meanwhile (cancelled, ended) is left alone."""
        try:
            self.store.apply([change])
            return True
        except (Conflict, NotFound):
            return False

    # -- alerts ---------------------------------------------------------------------------------------
    def _idle(self, attempts: list[Attempt], now: float, below: float, window: float) -> list[Alert]:
        candidates = idle_candidates(attempts, now, window)
        if self.utilisation is None or not candidates:
            return []
        already = self.records.sent([idle_key(a.id, a.attempt) for a in candidates], now)
        asked = [a for a in candidates if idle_key(a.id, a.attempt) not in already]
        if not asked:
            return []
        used = self.utilisation.recent([a.id for a in asked], window, now)
        return idle_alerts(asked, used, now, below=below, window=window)

    def _waiting_candidates(self, snap: Snapshot, now: float, after: float | None) -> list[str]:
        """Queued and held jobs submitted long enough ago to have waited `after`, oldest first;
        not those waiting for their owner's release, their --begin time or their dependency."""
        if after is None:
            return []
        gated = gate(snap)
        old = sorted((j for j in snap.pending if now - j.submitted_at >= after and j.id not in gated),
                     key=lambda j: j.submitted_at)
        return [j.id for j in old]

    def _awaiting_approval(self, now: float, after: float | None) -> list[Alert]:
        """Submissions waiting for an approver longer than `after`: the scheduling view holds
        queued and held jobs only, so these are read by their state (few: big asks)."""
        if after is None:
            return []
        return overdue_approvals(self.store.list([JobState.PENDING_APPROVAL]), now, after)

    def _waiting(self, job_ids: list[str], now: float) -> list[Waiting]:
        jobs = []
        for job_id in job_ids[:self.pending_per_tick]:
            try:
                job = self.store.get(job_id)
            except NotFound:
                continue
            if job.state in PENDING:
                jobs.append(job)
        reasons = self._reasons(now) if jobs else {}
        return [Waiting(job.id, job.team, job.name, waiting_since(job), reasons.get(job.id, job.reason))
                for job in jobs]

    def _reasons(self, now: float) -> dict[str, str]:
        """Why each queued or held job waits now, in the words of `gqa queue` and `gqa status` (a pass
        that explains, over the queue as they read it): the reason a job's record keeps was written
        when it was last held or queued, and a budget or spend changed since makes it wrong (a job
        held at $0.00 of $0.10 and still held at $0.10 of $0.08). Read only for alerts to send."""
        decision = plan(read_snapshot(self.store, now))
        return {**decision.waiting, **{s.job_id: "starting now" for s in decision.starts}}

    def _send(self, alert: Alert, now: float, tick: Tick) -> None:
        token = self.records.claim(alert.key, now, self.lease)
        if token is None:
            return   # another tick sent it, or is sending it
        try:
            self.notifier.notify(alert.subject, alert.message, kind=alert.kind, team=alert.team)
        except GqaError as exc:
            log.warning("alert %s not sent: %s", alert.key, exc)
            self.records.release(alert.key, token)
            tick.failed.append(alert)
            return
        self.records.confirm(alert.key, token, self.clock.now())
        tick.sent.append(alert)

    # -- metrics ----------------------------------------------------------------------------------------
    def _publish(self, tick: Tick, snap: Snapshot) -> None:
        if self.metrics is None:
            return
        for team, s in tick.spend.items():
            self.metrics.add_dimension("team", team)
            self.metrics.add_metric("TeamSpend", "None", round(s.spent, 4))
            if s.budget is not None:
                self.metrics.add_metric("BudgetUsed", "Percent", round(min(s.percent, 1e6), 2))
            self.metrics.flush_metrics()
        ages = [snap.now - j.submitted_at for j in snap.pending if not j.held]
        self.metrics.add_metric("OldestPendingAge", "Seconds", max(ages, default=0.0))
        self.metrics.add_metric("PendingJobs", "Count", len(ages))
        self.metrics.add_metric("HeldJobs", "Count", sum(j.held for j in snap.pending) + len(tick.held)
                                - len(tick.released))
        self.metrics.add_metric("AlertsSent", "Count", len(tick.sent))
        self.metrics.flush_metrics()


def _attempt(job: JobRecord) -> Attempt:
    # a RUNNING record always has started_at; the fallback only keeps a damaged one from being called idle
    started = job.started_at if job.started_at is not None else float("inf")
    return Attempt(job.id, job.team, job.name, job.attempts, started, job.gpus,
                   requested=job.request is not None or job.kill_reason is not None)


def waiting_since(job: JobRecord) -> float:
    """When the job's current wait began: the first of the pending states it
    has been in without a break (a requeued job waits from its requeue, not
    from its submission)."""
    since = job.submitted_at
    for step in reversed(job.history):
        if step.state not in PENDING:
            break
        since = step.at
    return since
