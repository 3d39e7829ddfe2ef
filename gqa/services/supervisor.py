"""The control loop's use cases: dispatch what the scheduler decides, react
to exits, carry out cancel/requeue requests, enforce wall time, promote
retries, and recover after a restart. The loop itself (an entry point)
decides when to call them; every rule lives here or below."""

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace

from ..models.errors import BackendUnavailable, Conflict, LaunchFailed, Misconfigured, NotFound
from ..models.job import JobRecord, JobState, Request
from ..models.units import format_duration
from ..models.outcome import CANCEL, PREEMPT, REQUEUE, SHUTDOWN, attempt_deadline
from ..ports import (Change, Clock, Compute, Exit, JobStore, LaunchLookup, PendingChanges, PendingFeed,
                     Random, Waker)
from ..scheduling import PendingJob, Start, plan
from ..scheduling.dependencies import delay_ends
from ..scheduling.kept import KeptQueue
from ..scheduling.slicing import next_change
from .holding import hold_and_release
from .launched import record_launch
from .pacing import Pacing
from .repair import LAUNCH_GRACE, repair, unrecorded_launch
from .settle import apply_holding, settle
from .snapshot import Band, Estimated, read_snapshot

log = logging.getLogger("gqa.supervisor")
DEFAULT_GRACE = 10.0
RELAUNCH_BACKOFF = 5.0  # seconds (jittered) before retrying a launch the backend refused, doubling with each
RELAUNCH_MAX = 600.0    # refusal in a row up to this: an outage or a broken deployment is not asked every pass
OUT_OF_TIME = "not launched: the dispatch pass ran out of time; back in the queue"
NEVER_MET_ROUNDS = 5    # passes one dispatch may run to follow cancels down a chain; the next tick goes on


class Supervisor:
    """`launches`, when the backend can find an attempt by its job (AWS Batch),
    lets a launch that failed uncertainly stay STARTING until
    repair_launches() has asked the backend; without it such a job goes back
    to the queue at once (a local launch is never uncertain).

    Where the backend's launch is its start (`compute.launch_is_start`, a
    local process) a launched attempt is recorded RUNNING at once; elsewhere
    (AWS Batch) it stays STARTING with its launch recorded, and its backend's
    events make it RUNNING (services/launched.py).

    `launch_batch`: the most starts a pass claims, launches and records
    together (None: all of them, in one write); `holds_per_pass`: the most
    holds and releases a pass writes, after its starts (None: all of them;
    services/holding.py); `waker`: woken when a pass stops at its deadline
    with starts left (services/pacing.py), or with holds and releases left."""

    def __init__(self, store: JobStore, compute: Compute, clock: Clock, rng: Random, *, grace: float = DEFAULT_GRACE,
                 launches: LaunchLookup | None = None, launch_grace: float = LAUNCH_GRACE,
                 probe: Callable[[str], None] | None = None, launch_batch: int | None = None,
                 holds_per_pass: int | None = None, waker: Waker | None = None):
        self.store, self.compute, self.clock, self.rng = store, compute, clock, rng
        self.launch_batch, self.holds_per_pass, self.waker = launch_batch, holds_per_pass, waker
        self.grace = grace
        self.launches, self.launch_grace = launches, launch_grace
        # called with the name of each step of a launch and a settlement as it is passed: a test's
        # fault injection kills the process there (tests/chaos); nothing else uses it
        self.probe = probe or (lambda step: None)
        # the --begin times the last pass saw: next_deadline() reads them instead of the whole queue again
        # (a job submitted since wakes the loop, whose pass sees it)
        self._begins: list[float] | None = None
        # the records the passes plan from, and their index, kept between passes: a pass costs what
        # changed since the one before and what it looks at, not a build over the whole queue
        self._estimated = Estimated(kept=True)
        self.kept = KeptQueue()

    def ratios_in_use(self, ratios: Mapping[str, float], bands: Mapping[str, Band] | None = None) -> dict[str, float]:
        """The teams' run-time ratios this supervisor's passes plan by, given those the samples give
        now and their medians' bands (a team's holds while it stands beside the new one,
        snapshot._stands): for the queue's views."""
        return self._estimated.in_use(ratios, bands)

    # -- the control loop ------------------------------------------------------
    def tick(self, until: float | None = None) -> list[JobRecord]:
        """One turn of the control loop, in the one order both backends use:
        attempts whose launch was never recorded go back to the queue (where a
        launch is never uncertain), due retries join the queue, users'
        requests are carried out before limits (a cancel says "cancelled", not
        "timed out"), then one scheduling pass, which begins no launch at or past
        `until` (on the clock; services/pacing.py). Returns the started jobs."""
        if self.launches is None:
            self.requeue_unlaunched()
        self.promote_retries()
        self.carry_out_requests()
        self.enforce_wall_time()
        return self.dispatch(until)

    # -- dispatch ------------------------------------------------------------
    def dispatch(self, until: float | None = None) -> list[JobRecord]:
        """One scheduling pass; start what it decides, in batches of `launch_batch`
        and beginning no launch at or past `until` (services/pacing.py). Returns
        the started jobs (where a launch is not a start: the launched ones, still
        STARTING). A pass that released held jobs (their budget allows them again)
        is followed by a second one, which starts those that fit: a raised budget
        leaves no GPU idle until some later event wakes the loop."""
        started, released = self._pass(until)
        if released:
            started += self._pass(until)[0]
        return started

    def _pass(self, until: float | None) -> tuple[list[JobRecord], bool]:
        """One scheduling pass: the jobs it started, and whether it released held jobs with all
        its starts and releases written (a second pass may start them; with some left, the
        waker's next pass writes the rest first, paced as ever)."""
        for _ in range(NEVER_MET_ROUNDS):
            feed: tuple[object, PendingChanges | None] | None = None
            if isinstance(self.store, PendingFeed):   # the store says what changed: a pass looks at that alone
                waiting, holding, mark, changed = self.store.scheduling_feed(self._estimated.mark)
                view, feed = (waiting, holding), (mark, changed)
            else:
                view = self.store.scheduling_view()
            if not view[0]:
                self._begins = []
                return [], False   # nothing waits: no decision to make, so no snapshot to read
            snap = read_snapshot(self.store, self.clock.now(), view=view, estimated=self._estimated, feed=feed)
            estimated = self._estimated
            begins = estimated.begin_times()
            self._begins = [j.begin for j in view[0] if j.begin is not None] if begins is None else begins
            self._begins = self._begins + delay_ends(snap) if snap.started else self._begins   # after:12+10
            decision = plan(self.kept.over(snap, version=estimated.version, changes=estimated.changes), explain=False)
            # a cancel may settle its successors' dependencies (afterany, afternotok): decide those now
            if not decision.never or not self._cancel_never_met(decision.never, view[0]):
                break
        for victim in decision.preempt:
            try:
                self._stop(self.store.get(victim), PREEMPT)
            except NotFound:
                pass
        pacing = Pacing(self.clock, until, self.launch_batch)
        # what the plan was made from, which each claim checks (read only for a pass that starts any)
        read = {p.id: p for p in snap.pending} if decision.starts else {}
        started: list[JobRecord] = []
        starts, left = list(decision.starts), 0
        while starts:
            size = pacing.next_batch(len(starts))
            if size == 0:
                left = len(starts)
                break
            batch, starts = starts[:size], starts[size:]
            done, handed_back = self._start_batch(batch, pacing, read)
            started += done
            if handed_back:
                left = handed_back + len(starts)
                break
        if left:
            log.warning("dispatch pass stopped at its time budget with %d start(s) left for the next pass", left)
        # after the starts, and paced: a team's whole queue crossing its budget must not hold up
        # every team's starts, nor fail the pass where the store throttles them (services/holding.py)
        holds = hold_and_release(self.store, decision, self.clock.now(), per_pass=self.holds_per_pass,
                                 time_left=pacing.may_launch())
        if (left or holds.left and not holds.refused) and self.waker is not None:
            # the next pass, woken now rather than at the next tick, starts or writes the rest
            self.waker.wake()
        return started, not left and not holds.left and any(j.state == JobState.QUEUED for j in holds.jobs)

    def _start_batch(self, starts: list[Start], pacing: Pacing,
                     read: dict[str, PendingJob] | None = None) -> tuple[list[JobRecord], int]:
        """Claim, launch and record these starts (one batch of a pass). Returns the started
        jobs and how many claimed jobs it handed back unlaunched, the pass's time being up."""
        now = self.clock.now()
        # the claim forgets the previous attempt's process: until this launch is recorded, the job
        # has none (what the repair and Batch's events go by)
        # each claim sets the attempt's granted wall time, or clears a previous attempt's (--time-min)
        # and holds only while the job is as the pass read it: a `gqa update` of its GPUs or wall time
        # written since would start it on the GPUs planned for its old size
        claims = [Change(s.job_id, JobState.QUEUED, JobState.STARTING, _claimed_text(s), now,
                         {"assigned": s.gpus, "pid": None, "proc_token": None, "time_limit": s.wall_time},
                         unchanged=_as_read((read or {}).get(s.job_id)))
                  for s in starts]
        if self.compute.holds_launches:
            # nothing it launches runs before release(): the claim is written with the launch's record, in
            # one transaction, and a crash before it leaves the jobs QUEUED and their processes held back
            starting, written = self._claimed(claims), claims
        else:
            # one conflicting claim (a job cancelled since the snapshot) must not stop the others:
            # each claim is its own GPUs, which the pass gave no other job
            starting, written = apply_holding(self.store, claims), []
        changes: list[Change] = []
        launched_ids: list[str] = []
        handed_back = 0
        launch_is_start = bool(getattr(self.compute, "launch_is_start", True))
        self.probe("claimed")
        for job in starting:
            attempt = job.attempts + 1
            if not pacing.may_launch():
                handed_back += 1
                if not self.compute.holds_launches:   # its claim is written: back to the queue, as never launched
                    at = self.clock.now()
                    changes.append(Change(job.id, JobState.STARTING, JobState.RETRY_WAIT, OUT_OF_TIME, at,
                                          {"assigned": (), "not_before": at}))
                continue
            began = self.clock.now()
            try:
                launched = self.compute.launch(job, job.assigned, attempt)
            except LaunchFailed as exc:  # the job itself cannot start (bad workdir, no executable)
                changes.append(Change(job.id, JobState.STARTING, JobState.FAILED, f"could not start: {exc}",
                                      self.clock.now(), {"attempts": attempt, "assigned": (),
                                                         "ended_at": self.clock.now(), "request": None,
                                                         "kill_reason": None}))
                continue
            except Exception as exc:  # the backend failed, not the job
                # BackendUnavailable: it refused the launch, so surely holds nothing; anything else
                # (LaunchUncertain, an error of our own after the call) may follow a launch
                if not isinstance(exc, BackendUnavailable) and self.launches is not None:
                    # it may hold the attempt: launching again could run it twice; repair_launches() asks later
                    log.warning("launch of job %s attempt %d may or may not have happened: %s", job.id, attempt, exc)
                    continue
                log.warning("launch of job %s failed: %s", job.id, exc)
                changes.append(self._refused(job, exc))
                continue
            finally:
                pacing.launched(began)
            launched_ids.append(job.id)
            at = self.clock.now()
            if not launch_is_start:   # it starts when the backend says so (reconcile.py)
                changes.append(record_launch(job.id, attempt, launched, at))
                continue
            changes.append(Change(job.id, JobState.STARTING, JobState.RUNNING, f"attempt {attempt} started", at,
                                  {"attempts": attempt, "pid": launched.pid, "proc_token": launched.token,
                                   "started_at": at, "exit_code": None, "signal": None}))
        self.probe("spawned")
        # the launch is recorded before the attempt may run: a crash before the
        # record leaves held-back processes that never run the job
        try:
            # one by one where a job moved meanwhile: a cancel, or its Batch event recorded the launch first
            recorded = apply_holding(self.store, _with_claims(written, changes))
        except Exception:
            self.compute.abandon(launched_ids)   # not recorded (disk full...): they must never run
            raise
        self.probe("recorded")
        tokens = {c.job_id: (c.fields or {}).get("proc_token") for c in changes}
        # recorded here: RUNNING, or (a launch that is not a start) STARTING with this launch
        started = [j for j in recorded if j.id in launched_ids and (
            j.state == JobState.RUNNING if launch_is_start else
            j.state == JobState.STARTING and j.proc_token == tokens.get(j.id))]
        running_ids = {j.id for j in started}
        self.compute.release([i for i in launched_ids if i in running_ids])
        self.compute.abandon([i for i in launched_ids if i not in running_ids])
        self.probe("released")
        return started, handed_back

    def _refused(self, job: JobRecord, exc: Exception) -> Change:
        """A launch the backend refused, so it holds nothing: back to the queue after a delay that
        doubles with each refusal in a row (counted with the capacity failures: the infrastructure,
        not the job, could not run it; no error retry is spent). A refusal of gqa's own rights
        (Misconfigured: e.g. a checkpoint pointer S3 denies) fails the same way every time: after
        retries.on_capacity of them in a row the job ends FAILED with the backend's words, rather
        than going between claim and retry for ever."""
        now = self.clock.now()
        failures = job.capacity_failures + 1
        what = f"the compute backend did not start it ({type(exc).__name__}: {exc})"
        if isinstance(exc, Misconfigured) and failures > job.spec.retries.on_capacity:
            return Change(job.id, JobState.STARTING, JobState.FAILED, f"{what}; {failures} times in a row", now,
                          {"assigned": (), "ended_at": now, "request": None, "kill_reason": None,
                           "capacity_failures": failures})
        delay = min(RELAUNCH_MAX, RELAUNCH_BACKOFF * 2 ** (failures - 1)) * (1 + self.rng.random())
        return Change(job.id, JobState.STARTING, JobState.RETRY_WAIT, f"{what}; retrying in {format_duration(delay)}",
                      now, {"assigned": (), "not_before": now + delay, "capacity_failures": failures})

    def _claimed(self, claims: list[Change]) -> list[JobRecord]:
        """The jobs as the claims would leave them, not written yet (a job gone meanwhile is left out)."""
        out = []
        for claim in claims:
            try:
                job = self.store.get(claim.job_id)
            except NotFound:
                continue
            if claim.holds_for(job):
                out.append(replace(job, state=JobState.STARTING, **(claim.fields or {})))
        return out

    def _cancel_never_met(self, never: dict[str, str], pending: list[PendingJob]) -> int:
        """Jobs whose dependency can never be met end CANCELLED with the reason,
        as Slurm's kill_invalid_depend does; guarded on the state the pass saw.
        How many it cancelled."""
        now = self.clock.now()
        held = {j.id: j.held for j in pending if j.id in never}
        changes = [Change(j, JobState.HELD if held.get(j) else JobState.QUEUED, JobState.CANCELLED, reason, now,
                          {"ended_at": now, "not_before": None}) for j, reason in never.items()]
        cancelled = apply_holding(self.store, changes)   # one that moved meanwhile is decided again next pass
        for job in cancelled:
            log.info("job %s: %s", job.id, job.reason)
        return len(cancelled)

    # -- exits -----------------------------------------------------------------
    def on_exits(self, exits: list[Exit]) -> list[JobRecord]:
        """Settle ended attempts, all in one transaction."""
        changes = []
        for ended in exits:
            try:
                job = self.store.get(ended.job_id)
            except NotFound:
                continue
            if job.state not in (JobState.RUNNING, JobState.STARTING) or job.attempts != ended.attempt:
                continue  # a late report of an attempt already accounted for
            self.compute.cleanup(job)
            changes.append(self._settle(job, ended))
        self.probe("exits-read")
        updated = self._apply_settled(changes)
        self.probe("exits-recorded")
        return updated

    def _settle(self, job: JobRecord, ended: Exit) -> Change:
        # a process of ours starts when it is launched: the attempt ran from the recorded start until it
        # ended (not until we noticed: a paused daemon must not charge the wait)
        at = self.clock.now() if ended.ended_at is None else max(job.started_at or 0.0, min(ended.ended_at,
                                                                                               self.clock.now()))
        return settle(job, ended, at=at, started=job.started_at, draw=self.rng.random(),
                      inventory=self.store.inventory())

    def _apply_settled(self, changes: list[Change]) -> list[JobRecord]:
        updated = apply_holding(self.store, changes)
        settled = {c.job_id for c in changes}
        for job in updated:   # only now that the result is committed may its record of the exit go
            if job.id in settled and job.state != JobState.RUNNING:
                try:
                    self.compute.forget(job)
                except Exception as exc:   # a read-only or failing disk: the result stands, the record stays
                    log.warning("job %s: could not remove the record of its exit: %s", job.id, exc)
        if any(j.state == JobState.RETRY_WAIT for j in updated):
            self.promote_retries()
        return updated

    # -- requests, wall time, retries ---------------------------------------------
    def carry_out_requests(self) -> None:
        for job in self.store.with_requests():
            reason = CANCEL if job.request == Request.CANCEL else REQUEUE
            self._stop(job, reason)

    def enforce_wall_time(self) -> None:
        """Stop attempts past their wall time or their job's GPU-hour budget."""
        now = self.clock.now()
        for job in self.store.list([JobState.RUNNING]):
            deadline = attempt_deadline(job) if job.kill_reason is None else None
            if deadline is not None and now >= deadline[0]:
                self._stop(job, deadline[1])

    def _stop(self, job: JobRecord, why: str) -> None:
        if job.kill_reason is None:
            if self.compute.ended(job):
                return   # it ended by itself, its end not settled yet: nothing to stop, and that end is its own
            try:
                [job] = self.store.apply([Change(job.id, job.state, None, "", self.clock.now(), {"kill_reason": why})])
            except Conflict:
                return
        self.compute.terminate(job, self._grace(job))

    def _grace(self, job: JobRecord) -> float:
        hint = job.spec.checkpoint.grace
        return float(hint) if hint else self.grace

    def promote_retries(self) -> None:
        now = self.clock.now()
        due = self.store.due_retries(now)
        changes = [Change(j.id, JobState.RETRY_WAIT, JobState.QUEUED, "back in the queue", now) for j in due]
        apply_holding(self.store, changes)   # one cancelled since it was read: promote the others

    def next_deadline(self) -> float | None:
        """When something must happen even if nothing wakes us: a retry's
        backoff ends, a wall time runs out, a --begin time comes, time slicing
        lets a waiting job stop a running one or promotes a starved one."""
        now = self.clock.now()
        times = [t for t in [self.store.next_wakeup()] if t is not None]
        policy = self.store.policy()
        if policy.slice_tiers:   # read only where slicing is on: the whole queue, as a pass reads it
            pending, running = self.store.scheduling_view()
            inventory = self.store.inventory()
            held = {index for run in running for index in run.gpus}
            free = sum(1 for gpu in (inventory.gpus if inventory else ()) if gpu.index not in held)
            wake = next_change(running, pending, policy, now, free) if pending else None
            if wake is not None:
                times.append(wake)
        begins = self._begins
        if begins is None:
            begins = [j.begin for j in self.store.scheduling_view()[0] if j.begin is not None]
        times += [t for t in begins if t > now]
        for job in self.store.list([JobState.RUNNING]):
            deadline = attempt_deadline(job) if job.kill_reason is None else None
            # one past due whose attempt has ended waits for its end to be settled, not for a stop
            if deadline is not None and (deadline[0] > now or not self.compute.ended(job)):
                times.append(deadline[0])
        return min(times) if times else None

    # -- launches never recorded ---------------------------------------------------------
    def repair_launches(self) -> dict[str, int]:
        """Ask the backend about jobs left STARTING without a recorded launch
        for longer than launch_grace (services/repair.py): record the ones it
        holds, requeue the ones it never received. Raises BackendUnavailable
        when the backend cannot be asked (the next pass asks again)."""
        counts = {"recorded": 0, "requeued": 0}
        if self.launches is None:
            return counts
        now = self.clock.now()
        for job in self.store.list([JobState.STARTING], history=True):
            if not unrecorded_launch(job, now, self.launch_grace):
                continue
            found = self.launches.find(job, job.attempts + 1)
            changes = repair(job, found, now=now, draw=self.rng.random(), inventory=self.store.inventory())
            try:
                repaired = self.store.apply(changes)[-1]
            except Conflict:   # it moved meanwhile (its event recorded the launch, a cancel): nothing to mend
                continue
            log.warning("job %s: %s", job.id, repaired.reason)
            counts["recorded" if found else "requeued"] += 1
            if repaired.state.active and repaired.kill_reason:
                # a stop decided while its launch was unknown reached nothing: it reaches the attempt now
                self.compute.terminate(repaired, self._grace(repaired))
        if counts["requeued"]:
            self.promote_retries()
        return counts

    # -- restart and shutdown --------------------------------------------------------
    def requeue_unlaunched(self, reason: str = "its launch was never recorded") -> int:
        """STARTING jobs with no recorded launch hold GPUs for nothing: a launch
        is recorded before it may run, so none of them runs anything. Back to
        the queue (not an error); one whose cancel was asked meanwhile ends
        CANCELLED instead of starting again."""
        now = self.clock.now()
        changes = []
        for job in self.store.list([JobState.STARTING]):
            if job.pid is not None or job.proc_token is not None:
                continue
            clear = {"assigned": (), "request": None, "kill_reason": None}
            if job.request == Request.CANCEL:
                changes.append(Change(job.id, JobState.STARTING, JobState.CANCELLED, "cancelled by user", now,
                                      dict(clear, ended_at=now, not_before=None)))
            else:
                changes.append(Change(job.id, JobState.STARTING, JobState.RETRY_WAIT, reason, now,
                                      dict(clear, not_before=now)))
        return len(apply_holding(self.store, changes))

    def recover(self) -> dict[str, int]:
        """After a restart: re-adopt live attempts, settle the ones that ended
        while we were down, requeue the ones that vanished (not an error).
        Cancels asked while we were down are carried out before anything
        starts: the caller's first tick() carries them out before it dispatches."""
        counts = {"adopted": 0, "finished": 0, "requeued": 0}
        counts["requeued"] += self.requeue_unlaunched("queue daemon restarted before the job started")
        for job in self.store.list([JobState.STARTING, JobState.RUNNING]):
            if job.pid is None:
                continue   # STARTING and claimed after the requeue above: not ours to judge
            if self.compute.alive(job):
                counts["adopted"] += 1
                if job.kill_reason:  # we were stopping it when we went down: finish the job
                    self.compute.terminate(job, self._grace(job))
                continue
            ended = self.compute.reap(job)
            self.compute.cleanup(job)
            self._apply_settled([self._settle(job, ended or Exit(job.id, job.attempts, None, None))])
            counts["finished" if ended else "requeued"] += 1
        self.promote_retries()
        return counts

    def shutdown(self, *, keep_jobs: bool) -> list[JobRecord]:
        """Stopping the daemon: by default running jobs are sent back to the
        queue (SIGTERM, checkpoint, resume later); keep_jobs leaves them running
        to be re-adopted by the next daemon."""
        running = self.store.list([JobState.RUNNING, JobState.STARTING])
        if not keep_jobs:
            for job in running:
                self._stop(job, SHUTDOWN)
        return running


def _with_claims(claims: list[Change], changes: list[Change]) -> list[Change]:
    """Each job's claim just before the change that records its launch, so that
    applied one by one a job that moved meanwhile skips both."""
    claim_of = {c.job_id: c for c in claims}
    out = []
    for change in changes:
        if change.job_id in claim_of:
            out.append(claim_of.pop(change.job_id))
        out.append(change)
    return out


def _gpus(indices: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in indices)


def _as_read(job: PendingJob | None) -> dict | None:
    """What a claim checks is unchanged since the pass read the job: what it was planned by."""
    return None if job is None else {"gpus": job.gpus, "wall_time": job.wall_time}


def _claimed_text(start: Start) -> str:
    what = f"assigned GPUs {_gpus(start.gpus)}" if start.gpus else "assigned no GPU (CPU only)"
    if start.wall_time:
        what += f", for {format_duration(start.wall_time)} (--time-min; backfilled before a reservation)"
    return what
