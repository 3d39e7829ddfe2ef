"""Submit: validate against the queue's hard limits, expand arrays and
sweeps, and record every job of the submission in one transaction."""

from ..models.errors import BackendUnavailable, Rejected
from ..models.expand import array_limit, expand
from ..models.job import JobRecord, JobState, Transition
from ..models.spec import JobSpec
from ..models.loader import validate_json
from ..ports import Clock, JobStore, Submission, Waker
from ..scheduling.budget import approval_reasons, gpu_hours_cap, price_for
from ..scheduling.limits import hard_limit_problems


class SubmitService:
    def __init__(self, store: JobStore, clock: Clock, waker: Waker | None = None):
        self.store, self.clock, self.waker = store, clock, waker

    def submit(self, spec: JobSpec, *, environment: dict[str, str] | None = None,
               owner: str | None = None) -> list[JobRecord]:
        """Queue the jobs of one submission. `environment`, when given, is the
        submitter's environment: each attempt starts from it. `owner`, when
        given, is the caller's verified identity and wins over the spec's text."""
        if owner is not None:
            spec = spec.model_copy(update={"owner": owner})
        inventory = self.store.inventory()
        if inventory is None:
            raise BackendUnavailable("this queue has no GPUs registered yet: start it once with `gqa local start`")
        policy = self.store.policy()
        team = self.store.teams().get(spec.team, policy.default_team)
        r = spec.resources
        problems = hard_limit_problems(
            gpus=r.gpus, gpu_type=r.gpu_type, wall_time=spec.limits.wall_time, cpus=r.cpus, memory=r.memory,
            inventory=inventory.gpus, policy=policy, total_cpus=inventory.cpus, total_memory=inventory.memory,
            team_max_gpus=team.max_gpus, user_max_gpus=team.max_gpus_per_user, team=spec.team)
        if problems:
            raise Rejected("; ".join(problems))
        now = self.clock.now()
        limit = array_limit(spec)
        hours = gpu_hours_cap(r.gpus, spec.limits.wall_time, spec.limits.max_gpu_hours)
        price = price_for(r.gpu_type, inventory.gpus)
        approval = approval_reasons(gpus=r.gpus, gpu_hours=hours, cost=price * hours if price else 0.0,
                                    policy=policy)
        if approval:
            state, reason = JobState.PENDING_APPROVAL, "needs approval: " + "; ".join(approval)
        else:
            state, reason = JobState.QUEUED, "admitted"
        history = (Transition(JobState.SUBMITTED, now, "submitted"), Transition(state, now, reason))
        records = [
            JobRecord(
                id="", group="", name=job_spec.name, team=job_spec.team, owner=job_spec.owner,
                tier=job_spec.priority.rank, gpus=r.gpus, gpu_type=r.gpu_type, cpus=r.cpus, memory=r.memory,
                wall_time=job_spec.limits.wall_time, submitted_at=now, spec_json=job_spec.model_dump_json(),
                state=state, array_index=index, group_limit=limit, extra_env=env, submit_env=environment,
                reason=reason, history=history, max_gpu_hours=job_spec.limits.max_gpu_hours, spot=job_spec.spot)
            for job_spec, index, env in expand(spec)
        ]
        created = self.store.create(records)
        if self.waker is not None:
            self.waker.wake()
        return created

    def admit(self, submission: Submission) -> list[JobRecord]:
        """A submission that arrived through the intake queue (AWS): the spec as
        the submitter sent it, owned by the identity the API verified."""
        spec = validate_json(submission.spec_json, source="submission")
        return self.submit(spec, environment=submission.environment, owner=submission.owner)
