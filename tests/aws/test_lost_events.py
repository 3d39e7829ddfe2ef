"""Lost Batch events on moto: jobs' whole lives through the real handlers while
EventBridge drops some attempts' events (all of them, or only the end), and
Batch forgets some jobs. The dispatcher's scheduled passes ask Batch about
quiet attempts (DescribeJobs, answered by BatchTruth from what the scenario
had Batch do): every job still ends exactly once, charged what Batch ran, and
the lost events delivered late change nothing."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.job import JobRecord, JobState
from gqa.scheduling.budget import period_of
from gqa.services.overdue import QUIET
from tests.aws.fake_batch import NAMES, POOLS, CONTEXT, FakeBatch, Submitted, deployment
from tests.aws.lambda_driver import SCHEDULE_EVENT
from tests.aws.test_lifecycle import ROUND, Run, admit_all, attempt_events

pytestmark = [pytest.mark.aws, pytest.mark.slow]
MAX_ROUNDS = 40
S = JobState
HOUR = 3600.0
SPOT, ON_DEMAND = (p.price for p in POOLS)    # per GPU-hour; every job asks for one GPU
assert ROUND > QUIET   # an attempt whose events were lost is asked about in the next round


class BatchTruth:
    """Batch's own record, as DescribeJobs tells it (moto's Batch runs nothing):
    for each job it was given, the latest of its state changes at or before
    now, whether or not EventBridge delivered them (RUNNABLE before the first);
    nothing for a job it has forgotten."""

    def __init__(self, client: Any, clock: Any):
        self.clock = clock
        self.changes: dict[str, list[tuple[float, dict[str, Any]]]] = {}   # Batch job id -> (at, detail)
        self.jobs: dict[str, Submitted] = {}
        self.forgotten: set[str] = set()
        self.calls = 0
        events = client.meta.events
        events.register("before-parameter-build.batch.DescribeJobs", self._asked)
        events.register("before-call.batch.DescribeJobs", self._answer)

    def learn(self, job: Submitted, events: list[dict[str, Any]]) -> None:
        self.jobs[job.batch_job_id] = job
        for event in events:
            detail = event["detail"]
            at = (detail.get("stoppedAt") or detail["startedAt"]) / 1000
            self.changes.setdefault(job.batch_job_id, []).append((at, detail))

    def _now(self, batch_id: str) -> dict[str, Any] | None:
        if batch_id in self.forgotten or batch_id not in self.jobs:
            return None
        seen = [(at, d) for at, d in self.changes.get(batch_id, []) if at <= self.clock.now()]
        if not seen:
            return FakeBatch.event(self.jobs[batch_id], "RUNNABLE", at=self.clock.now())["detail"]
        return max(seen, key=lambda s: s[0])[1]

    @staticmethod
    def _asked(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["gqa_describe"] = list(params["jobs"])

    def _answer(self, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls += 1
        ids = context["gqa_describe"]
        assert len(ids) <= 100                       # DescribeJobs' limit
        jobs = [d for d in map(self._now, ids) if d is not None]
        return AWSResponse("https://batch.us-east-1.amazonaws.com/v1/describejobs", 200, {}, None), \
            {"jobs": jobs, "ResponseMetadata": {"HTTPStatusCode": 200, "RetryAttempts": 0}}


@dataclass
class Lost(Run):
    dropped: list[dict[str, Any]] = field(default_factory=list)   # events EventBridge never delivered
    forgotten: Counter[str] = field(default_factory=Counter)        # attempts Batch forgot, per job
    ran: Counter[str] = field(default_factory=Counter)              # seconds Batch ran the job's known attempts
    cost: float = 0.0                                               # what those seconds cost at the pools' prices
    passes: int = 0
    describe_calls: int = 0
    late: list[dict[str, Any]] = field(default_factory=list)        # what the late deliveries answered
    latest: dict[str, str] = field(default_factory=dict)            # job -> its latest checkpoint so far
    resume: dict[tuple[str, int], str] = field(default_factory=dict)   # (job, attempt) -> what it must resume from
    spend: dict[str, float] = field(default_factory=dict)


def happens(event: dict[str, Any]) -> float:
    detail = event["detail"]
    return (detail.get("stoppedAt") or detail["startedAt"]) / 1000


def ran_for(events: list[dict[str, Any]]) -> float:
    """Seconds from the container's start to its stop, as the attempt's end event says."""
    detail = events[-1]["detail"]
    return (detail["stoppedAt"] - detail["startedAt"]) / 1000


def play(seed: int, *, drop: float, forget: float,
         wait: tuple[float, float] = (0.0, 0.0)) -> tuple[Lost, dict[str, JobRecord]]:
    """Each attempt's events are all dropped with chance `drop`, or only its end
    with chance `drop`; an attempt whose events were all dropped is forgotten by
    Batch with chance `forget` (it leaves a checkpoint first). Each attempt
    waits RUNNABLE for an instance between `wait` seconds first; its events are
    delivered in the round in which they happen."""
    rng = random.Random(seed)
    run = Lost()
    with deployment(now=time.time()) as world:
        compute = world.dispatch.container().compute
        batch = FakeBatch(compute.client)
        truth = BatchTruth(compute.client, world.clock)
        ids = admit_all(world)
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        coming: list[tuple[float, dict[str, Any]]] = []      # (when it happens, event) not delivered yet
        for _ in range(MAX_ROUNDS):
            if all(store.get(i).state == S.SUCCEEDED for i in ids):
                break
            world.dispatch.handler(SCHEDULE_EVENT, CONTEXT)   # asks about quiet attempts, then schedules
            run.passes += 1
            new = batch.take_new()
            rng.shuffle(new)
            for job in new:
                run.resume[(job.job_id, job.attempt)] = run.latest.get(job.job_id, "")
                events = attempt_events(rng, job, world.clock.now() + rng.uniform(*wait), run, world)
                truth.learn(job, events)
                luck = rng.random()
                delivered = events if luck >= 2 * drop else [] if luck < drop else events[:-1]
                run.dropped += events[len(delivered):]
                if not delivered and rng.random() < forget:
                    truth.forgotten.add(job.batch_job_id)
                    run.forgotten[job.job_id] += 1
                    if events[-1]["detail"].get("statusReason", "").startswith("Host EC2"):
                        run.reclaims[job.job_id] -= 1        # a reclaim gqa never learns of
                    run.checkpoint_at[(job.job_id, job.attempt + 1)] = world.write_checkpoint(
                        job.job_id, step=100 * job.attempt + 50)
                else:
                    run.ran[job.job_id] += ran_for(events)
                    run.cost += ran_for(events) * (SPOT if job.spot else ON_DEMAND) / 3600
                if (job.job_id, job.attempt + 1) in run.checkpoint_at:
                    run.latest[job.job_id] = run.checkpoint_at[(job.job_id, job.attempt + 1)]
                coming += [(happens(event), event) for event in delivered]
            # what happens before the next round is delivered now (at once without a wait, as before)
            now, due = world.clock.now() + ROUND, []
            due, coming = [e for at, e in coming if at < now], [(at, e) for at, e in coming if at >= now]
            for event in due:
                world.reconcile.handler(event, CONTEXT)
            world.clock.advance(ROUND)
        run.submitted = list(batch.submitted)
        run.describe_calls = truth.calls
        before = {i: store.get(i) for i in ids}
        run.spend = store.spend(period_of(world.clock.now()))
        # the lost events arrive after all (EventBridge retried them for hours): nothing changes
        run.late = [world.reconcile.handler(event, CONTEXT) for event in run.dropped]
        after = {i: store.get(i) for i in ids}
        assert after == before and store.spend(period_of(world.clock.now())) == run.spend
        return run, after


def check(run: Lost, jobs: dict[str, JobRecord]) -> None:
    ids = list(jobs)
    assert {i: j.state for i, j in jobs.items()} == {i: S.SUCCEEDED for i in ids}
    # each job ended exactly once, and each attempt was settled exactly once
    for i, job in jobs.items():
        steps = [t.state for t in job.history]
        assert steps.count(S.SUCCEEDED) == 1, i
        assert steps.count(S.RETRY_WAIT) + 1 == job.attempts, i
        assert (job.error_retries, job.reclaims) == (0, run.reclaims[i]), i
        assert job.attempts == run.reclaims[i] + run.forgotten[i] + 1, i
        # charged what Batch ran (from its startedAt to its stoppedAt), nothing for what it forgot
        assert job.gpu_seconds == pytest.approx(run.ran[i]), i
    assert sum(run.spend.values()) == pytest.approx(run.cost)
    assert run.dropped                                              # the seed did lose events
    # one Batch job per attempt: never a second SubmitJob for the same attempt
    attempts = [(s.job_id, s.attempt) for s in run.submitted]
    assert len(attempts) == len(set(attempts))
    # every attempt resumes from the latest checkpoint its job left, after a lost attempt too
    assert {(s.job_id, s.attempt): s.environment["GQA_RESUME_FROM"] for s in run.submitted} == run.resume
    assert {r["action"] for r in run.late} == {"ignored"}
    # the cost of asking: at most one DescribeJobs per scheduled pass
    assert 0 < run.describe_calls <= run.passes


def test_jobs_whose_events_were_lost_still_end_exactly_once():
    run, jobs = play(seed=5, drop=0.2, forget=0.3)
    check(run, jobs)
    assert sum(run.forgotten.values()) > 0                          # and Batch forgot some


def test_with_every_end_event_lost_jobs_end_by_asking_batch_alone():
    run, jobs = play(seed=9, drop=0.5, forget=0.0)    # half lose every event, the others their end
    check(run, jobs)
    assert len(run.dropped) >= sum(j.attempts for j in jobs.values())


def test_attempts_waiting_hours_for_an_instance_with_their_events_lost_still_end_exactly_once():
    """Launched attempts stay STARTING while Batch keeps them RUNNABLE: the
    scheduled passes ask about them while they wait, record their start (or
    their end) from Batch's answer, and charge only what Batch ran."""
    run, jobs = play(seed=13, drop=0.25, forget=0.2, wait=(HOUR / 2, 2 * HOUR))
    check(run, jobs)
    assert sum(run.forgotten.values()) > 0
    for job in jobs.values():   # each RUNNING step is Batch's start, half an hour or more after the launch
        claimed = None
        for step in job.history:
            if step.state == S.STARTING:
                claimed = step.at
            elif step.state == S.RUNNING:
                assert claimed is not None and step.at - claimed >= HOUR / 2, job.id
