"""Submit: validate against the queue's hard limits, expand arrays and
sweeps, and record every job of the submission in one transaction.

Locally submit() does it all at once. On AWS it is two steps: the API
accept()s (checks, reserves the ids, puts the submission on the intake
queue) and the admit function admit()s (checks again, writes the jobs under
the reserved ids; a redelivery finds them written and changes nothing).
Jobs admitted to wait for approval are announced to the approvers through
the notifier, when there is one (services/approvals.py)."""

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..models.dependency import parse_dependency
from ..models.errors import BackendUnavailable, GqaError, NotFound, Rejected, SpecError
from ..models.expand import array_limit, expand
from ..models.job import JobRecord, JobState, Transition, group_of, held_by
from ..models.spec import JobSpec
from ..models.loader import validate_json
from ..models.sbatch_values import exported_environment
from ..ports import (Admissions, Clock, Intake, Inventory, JobStore, Notifier, SchedulingInputs, Settings, Submission,
                     Waker)
from ..scheduling.budget import BudgetLedger, approval_reasons, gpu_hours_cap, price_for, unbounded_cost
from ..scheduling.dependencies import NEVER, dependency_verdict
from ..scheduling.limits import hard_limit_problems
from ..scheduling.snapshot import Gpu, PendingJob, Policy, Snapshot, TeamPolicy
from . import lookup
from .access import Principal
from .approvals import APPROVAL, approval_request, newly_awaiting
from .chunked import admit_chunk
from .snapshot import spend_now
from .teams import for_team

ACCEPTED = "accepted; waiting for admission"
HELD_AT_SUBMISSION = held_by("its owner", " (--hold): it starts only after gqa release")
log = logging.getLogger("gqa.submit")


@dataclass(frozen=True)
class Recorded:
    """A submission's jobs as written, and what the scheduling pass will do to them that their
    submitter should hear now, with the pass's own reason and numbers: "will be cancelled ...: a
    dependency that can never be met", "will be held by its team's budget: ..."; None where
    nothing keeps them from starting by themselves."""

    jobs: list[JobRecord]
    note: str | None = None


class SubmitService:
    def __init__(self, store: JobStore, clock: Clock, waker: Waker | None = None, intake: Intake | None = None,
                 notifier: Notifier | None = None, spec_check: Callable[[JobSpec], str | None] | None = None,
                 admissions: Admissions | None = None):
        """`spec_check`: the backend's own limit on a spec (AWS Batch's job payload), checked
        before anything is reserved; it answers why the spec cannot run there, or None.
        `admissions`: where a submission larger than one chunk is admitted a chunk per
        intake message (services/chunked.py), the rest handed on through `intake`."""
        self.store, self.clock, self.waker, self.intake = store, clock, waker, intake
        self.notifier = notifier
        self.spec_check = spec_check
        self.admissions = admissions

    def submit(self, spec: JobSpec, *, environment: dict[str, str] | None = None,
               owner: str | None = None, caller: Principal | None = None) -> list[JobRecord]:
        """Queue the jobs of one submission. `environment`, when given, is the
        submitter's environment: each attempt starts from it. `owner`, when
        given, is the caller's verified identity and wins over the spec's text;
        `caller`, when given, must have the right to the spec's team (teams.py)."""
        return self.record(spec, environment=environment, owner=owner, caller=caller).jobs

    def record(self, spec: JobSpec, *, environment: dict[str, str] | None = None,
               owner: str | None = None, caller: Principal | None = None) -> Recorded:
        """submit(), with what its submitter is told besides (Recorded.note)."""
        spec = spec if caller is None else for_team(self.store, spec, caller)
        spec, inventory, policy = self._checked(spec, owner)
        problem = self.spec_check(spec) if self.spec_check is not None else None
        if problem:
            raise SpecError(problem)
        self._refuse_unknown_dependencies(spec)
        never = self._never_met(spec)
        created = self.store.create(self._admitted(spec, environment, inventory, policy))
        # fresh ids: every job is this submission's own
        self._ask_approval([j for j in created if j.state == JobState.PENDING_APPROVAL], inventory.gpus)
        if self.waker is not None:
            self.waker.wake()
        if never is not None:
            return Recorded(created, f"will be cancelled at the queue's next pass: {never}")
        held = budget_hold(self.store, created[0], self.clock.now())
        return Recorded(created, f"will be held by its team's budget: {held}" if held else None)

    def accept(self, spec: JobSpec, *, owner: str, environment: dict[str, str] | None = None,
               intake: Intake | None = None, caller: Principal | None = None) -> list[JobRecord]:
        """The API's half of a submission: the same checks as submit(), then ids
        reserved and the submission sent to the intake queue (`intake`, or the
        one given to the constructor). Writes no job: returns the jobs as they
        will be, SUBMITTED until the admit function records them."""
        intake = intake or self.intake
        if intake is None:
            raise BackendUnavailable("no intake queue to accept submissions on")
        spec = spec if caller is None else for_team(self.store, spec, caller)
        spec, _, _ = self._checked(spec, owner)
        problem = self.spec_check(spec) if self.spec_check is not None else None
        if problem:
            raise SpecError(problem)
        self._refuse_unknown_dependencies(spec)
        now = self.clock.now()
        submitted = (Transition(JobState.SUBMITTED, now, "submitted"),)
        reserved = self.store.reserve_ids(self._records(spec, environment, now, JobState.SUBMITTED, ACCEPTED,
                                                        submitted))
        intake.send(Submission(spec_json=spec.model_dump_json(), owner=owner, tier=spec.priority.rank,
                               idempotency_key=f"jobs-{reserved[0].group}", environment=environment,
                               job_ids=tuple(j.id for j in reserved), seq=reserved[0].seq))
        return reserved

    def admit(self, submission: Submission, *, delivery: str = "", seconds: float | None = None) -> list[JobRecord]:
        """A submission that arrived through the intake queue (AWS): the spec as
        the submitter sent it, owned by the identity the API verified, written
        under the ids the API reserved. A spec over a hard limit by now (the
        limits changed since it was accepted) is recorded REJECTED with the
        reason, so its ids say what became of it. With `admissions`, one
        larger than a chunk (or a continuation of one) writes one chunk
        (services/chunked.py); `delivery` names this delivery of the message,
        `seconds` is the time the caller has left for it."""
        spec = validate_json(submission.spec_json, source="submission").model_copy(
            update={"owner": submission.owner})
        seq = submission.seq
        if not submission.job_ids or seq is None:
            raise SpecError("malformed submission: no reserved job ids", source="submission")
        if not 0 <= submission.start < len(submission.job_ids):
            raise SpecError(f"malformed submission: start {submission.start} is not one of its "
                            f"{len(submission.job_ids)} jobs", source="submission")
        gpus: tuple[Gpu, ...] = ()
        try:
            spec, inventory, policy = self._checked(spec, None)
            state, reason, history = self._verdict(spec, inventory, policy)
            gpus = inventory.gpus
        except Rejected as exc:
            now = self.clock.now()
            state, reason = JobState.REJECTED, f"rejected: {exc}"
            history = (Transition(JobState.SUBMITTED, now, "submitted"), Transition(state, now, reason))
        expanded = expand(spec)
        if len(expanded) != len(submission.job_ids):
            raise SpecError(f"malformed submission: {len(submission.job_ids)} job ids for {len(expanded)} jobs",
                            source="submission")

        def part(start: int, end: int) -> list[JobRecord]:
            """Jobs start..end-1 under their reserved ids (a chunk builds only its own)."""
            return placed(self._records(spec, submission.environment, history[0].at, state, reason, history,
                                        expanded[start:end]), submission.job_ids, seq, start)

        first = part(0, 1)[0]
        if self.admissions is not None and self.intake is not None and (
                submission.start > 0 or len(expanded) > self.admissions.chunk(first, seconds)):
            created = admit_chunk(self.store, self.admissions, self.intake, submission, first, len(expanded), part,
                                  delivery, seconds=seconds,
                                  announce=lambda job, count: self._ask_approval([job] * count, gpus))
            if self.waker is not None and created:
                self.waker.wake()
            return created
        given = part(0, len(expanded))
        created = self.store.create(given)
        self._ask_approval(newly_awaiting(given, created), gpus)
        if self.waker is not None:
            self.waker.wake()
        return created

    # -- the parts -------------------------------------------------------------------------------
    def _ask_approval(self, waiting: list[JobRecord], gpus: tuple[Gpu, ...]) -> None:
        """One message to the approvers about the jobs this admission wrote to wait for them."""
        if self.notifier is None:
            return
        request = approval_request(waiting, gpus)
        if request is None:
            return
        try:
            self.notifier.notify(request.subject, request.message, kind=APPROVAL, team=request.team)
        except GqaError as exc:
            # the jobs are recorded: failing now would only redeliver a submission that then announces
            # nothing; the budget watch alerts on jobs waiting too long
            log.warning("approval request for %s not sent: %s", waiting[0].group, exc)

    def _checked(self, spec: JobSpec, owner: str | None) -> tuple[JobSpec, Inventory, Policy]:
        """The spec (owned by `owner` when given) if it is within the queue's hard limits."""
        if owner is not None:
            spec = spec.model_copy(update={"owner": owner})
        inventory, policy, team = team_within_limits(self.store, spec)   # the teams read once: a Query on AWS
        return cost_bounded(spec, team.budget, inventory, policy), inventory, policy

    def _refuse_unknown_dependencies(self, spec: JobSpec) -> None:
        """A dependency on a job that does not exist is refused, as sbatch refuses
        it, before anything is written. A task of an array still being admitted
        a chunk at a time (AWS) exists already: its id is reserved. So is one on
        a job the history retention deleted (local), saying so."""
        if not spec.after:
            return
        for ref in parse_dependency(spec.after).jobs:
            group = group_of(ref)
            gone = lookup.purged(self.store, ref)
            if gone is not None:   # its end would decide this job, and no record of it is left
                raise SpecError(f"dependency {spec.after}: {gone}")
            if self.store.reserved(group) and (group == ref or self._task_exists(ref)):
                continue
            raise SpecError(f"dependency {spec.after}: job {ref} does not exist")

    def _never_met(self, spec: JobSpec) -> str | None:
        """Why a dependency can never be met (afterok on a job that failed), in the words the pass
        will cancel the job with; None where it may be. Queued all the same, as sbatch queues it:
        a pipeline's driver script goes on to its next submission. An array's aftercorr is told
        task by task, each against its own counterpart: the pass tells it."""
        if not spec.after or (parse_dependency(spec.after).corresponding and spec.is_group):
            return None
        verdict, reason = dependency_now(self.store, spec)
        return reason if verdict == NEVER else None

    def _task_exists(self, ref: str) -> bool:
        """Recorded, or its array's tasks are not all recorded yet (accepted, or being admitted in chunks)."""
        try:
            self.store.get(ref)
            return True
        except NotFound:
            pass
        progress = self.admissions.progress(group_of(ref)) if self.admissions is not None else None
        if progress is not None:
            return progress.remaining > 0
        try:
            self.store.resolve(group_of(ref), history=False)
        except NotFound:
            return True    # accepted, none of its tasks admitted yet
        return False

    def _admitted(self, spec: JobSpec, environment: dict[str, str] | None, inventory: Inventory,
                  policy: Policy) -> list[JobRecord]:
        """The submission's jobs, QUEUED or waiting for approval."""
        state, reason, history = self._verdict(spec, inventory, policy)
        return self._records(spec, environment, history[0].at, state, reason, history)

    def _verdict(self, spec: JobSpec, inventory: Inventory,
                 policy: Policy) -> tuple[JobState, str, tuple[Transition, ...]]:
        """Queued, or waiting for approval: the state, the reason, the history it starts with."""
        now = self.clock.now()
        approval = approval_needed(spec, inventory, policy)
        if approval:
            state, reason = JobState.PENDING_APPROVAL, "needs approval: " + "; ".join(approval)
        elif spec.hold:
            state, reason = JobState.HELD, HELD_AT_SUBMISSION
        else:
            state, reason = JobState.QUEUED, "admitted"
        return state, reason, (Transition(JobState.SUBMITTED, now, "submitted"), Transition(state, now, reason))

    @staticmethod
    def _records(spec: JobSpec, environment: dict[str, str] | None, now: float, state: JobState, reason: str,
                 history: tuple[Transition, ...],
                 expanded: list[tuple[JobSpec, int | None, dict[str, str]]] | None = None) -> list[JobRecord]:
        """The jobs of `expanded` (default: the whole of expand(spec)); an array's
        tasks share one spec object, whose JSON is made once."""
        environment = exported_environment(spec.export, environment)   # what --export passes on
        r = spec.resources
        limit = array_limit(spec)
        texts: dict[int, str] = {}
        return [
            JobRecord(
                id="", group="", name=job_spec.name, team=job_spec.team, owner=job_spec.owner,
                tier=job_spec.priority.rank, gpus=r.gpus, gpu_type=r.gpu_type, cpus=r.cpus, memory=r.memory,
                wall_time=job_spec.limits.wall_time, submitted_at=now,
                spec_json=texts.get(id(job_spec)) or texts.setdefault(id(job_spec), job_spec.model_dump_json()),
                state=state, array_index=index, group_limit=limit, extra_env=env, submit_env=environment,
                reason=reason, history=history, max_gpu_hours=job_spec.limits.max_gpu_hours, spot=job_spec.spot,
                ended_at=now if state.terminal else None,   # rejected at once: ended, for history
                dependency=job_spec.after, user_hold=job_spec.hold, begin=job_spec.begin, nice=job_spec.nice,
                exclusive=r.exclusive, time_min=job_spec.limits.time_min)
            for job_spec, index, env in (expand(spec) if expanded is None else expanded)
        ]


def dependency_now(store: SchedulingInputs, spec: JobSpec) -> tuple[str, str]:
    """The pass's verdict on the dependency of a job of `spec`, as the jobs it names stand now
    (scheduling/dependencies.py): MET, WAIT or NEVER, with the reason."""
    assert spec.after is not None
    r = spec.resources
    job = PendingJob(id="", team=spec.team, user=spec.owner, tier=spec.priority.rank, gpus=r.gpus,
                     submitted_at=0.0, name=spec.name, dependency=spec.after)
    snap = Snapshot(now=0.0, gpus=(), named=store.states_of(parse_dependency(spec.after).jobs))
    return dependency_verdict(job, snap)


def budget_hold(store: SchedulingInputs, job: JobRecord, now: float) -> str | None:
    """Why the scheduling pass will hold `job`, just queued, for its team's budget: the pass's own
    rule (BudgetLedger.over) over the team's spend and what its running jobs may still cost, as
    they stand now; None where the budget allows it (or the team has none)."""
    policy, teams = store.policy(), store.teams()
    if job.state != JobState.QUEUED or teams.get(job.team, policy.default_team).budget is None:
        return None
    pending, running = store.scheduling_view()
    queued = next((p for p in pending if p.id == job.id), None)
    if queued is None:   # started, or cancelled, already
        return None
    inventory = store.inventory()
    gpus = inventory.gpus if inventory else ()
    snap = Snapshot(now=now, gpus=gpus, pending=(queued,), running=tuple(running), teams=teams, policy=policy,
                    spend=spend_now(store, running, gpus, now))
    return BudgetLedger(snap).over(queued)


def within_limits(settings: Settings, spec: JobSpec) -> tuple[Inventory, Policy]:
    """The queue's GPUs and policy, if `spec` is within its hard limits (the
    GPUs there are, the policy's per-job limits, its team's caps); Rejected
    naming every limit it is over. A submission and `gqa update` alike."""
    inventory, policy, _ = team_within_limits(settings, spec)
    return inventory, policy


def team_within_limits(settings: Settings, spec: JobSpec) -> tuple[Inventory, Policy, TeamPolicy]:
    """within_limits, and the team's policy it read."""
    inventory = settings.inventory()
    if inventory is None:
        raise BackendUnavailable("this queue has no GPUs registered yet: on a workstation, start it once with "
                                 "`gqa local start`; on AWS `cdk deploy` registers the pools (deploy the "
                                 "service stack again if it did not finish)")
    policy = settings.policy()
    team = settings.teams().get(spec.team, policy.default_team)
    r = spec.resources
    problems = hard_limit_problems(
        gpus=r.gpus, gpu_type=r.gpu_type, wall_time=spec.limits.wall_time, cpus=r.cpus, memory=r.memory,
        inventory=inventory.gpus, policy=policy, total_cpus=inventory.cpus, total_memory=inventory.memory,
        team_max_gpus=team.max_gpus, user_max_gpus=team.max_gpus_per_user, team=spec.team)
    if problems:
        raise Rejected("; ".join(problems))
    return inventory, policy, team


def cost_bounded(spec: JobSpec, budget: float | None, inventory: Inventory, policy: Policy) -> JobSpec:
    """The spec, with a bound on its cost where its team has a `budget`. A job with neither a wall
    time nor max_gpu_hours on priced GPUs may cost without bound, so no budget would ever let it
    start: it gets the queue's maximum wall time (--max-wall-time), as Slurm gives a job without
    --time its partition's limit, and where there is none it is Rejected, saying what to add."""
    if budget is None:
        return spec
    r, limits = spec.resources, spec.limits
    problem = unbounded_cost(spec.team, budget, r.gpus, limits.wall_time, limits.max_gpu_hours,
                             price_for(r.gpu_type, inventory.gpus))
    if problem is None:
        return spec
    if policy.max_wall_time is None:
        raise Rejected(problem)
    return spec.model_copy(update={"limits": limits.model_copy(update={"wall_time": int(policy.max_wall_time)})})


def approval_needed(spec: JobSpec, inventory: Inventory, policy: Policy) -> list[str]:
    """Why a job of this spec must wait for an approver (its size, GPU-hours or
    cost over the policy's thresholds), with the numbers; empty if it need not."""
    r = spec.resources
    hours = gpu_hours_cap(r.gpus, spec.limits.wall_time, spec.limits.max_gpu_hours)
    price = price_for(r.gpu_type, inventory.gpus)
    return approval_reasons(gpus=r.gpus, gpu_hours=hours, cost=price * hours if price else 0.0, policy=policy)


def placed(records: list[JobRecord], job_ids: tuple[str, ...], seq: int, offset: int = 0) -> list[JobRecord]:
    """The records, jobs `offset`.. of their submission, under the ids reserved
    for them (in expand order, seqs from `seq` on). The ids must be the ones
    reserve_ids gives such a submission: one group, "G_i" for array task i,
    "G" for a single job."""
    if offset + len(records) > len(job_ids):
        raise SpecError(f"malformed submission: {len(job_ids)} job ids for {len(records)} jobs", source="submission")
    group = job_ids[0].split("_")[0]
    out = []
    for n, (record, job_id) in enumerate(zip(records, job_ids[offset:offset + len(records)]), start=offset):
        expected = group if record.array_index is None else f"{group}_{record.array_index}"
        if job_id != expected or (record.array_index is None and len(records) != 1):
            raise SpecError(f"malformed submission: job id {job_id} does not fit job {n} (expected {expected})",
                            source="submission")
        out.append(replace(record, id=job_id, group=group, seq=seq + n))
    return out
