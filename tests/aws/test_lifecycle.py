"""Jobs' whole lives through the real handlers on moto: submission messages ->
admit -> dispatch -> (FakeBatch) state-change events -> reconcile, with spot
reclaims injected at random points, until every job has succeeded once."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.job import JobRecord, JobState
from tests.aws.fake_batch import (NAMES, RECLAIM, CONTEXT, WAKEUP_EVENT, Deployment, FakeBatch, Submitted,
                                  deployment)
from tests.builders import spec

pytestmark = [pytest.mark.aws, pytest.mark.slow]
JOBS = 20
RECLAIM_CHANCE = 0.5
CHECKPOINT_CHANCE = 0.7
# past the longest retry backoff (max_backoff, 600 s by default) plus an attempt's run
ROUND = 800.0
MAX_ROUNDS = 40


@dataclass
class Run:
    """What the scenario did, for the assertions."""

    reclaims: Counter[str] = field(default_factory=Counter)
    checkpoint_at: dict[tuple[str, int], str] = field(default_factory=dict)   # (job, attempt) -> expected resume
    succeeded: Counter[str] = field(default_factory=Counter)                   # settled SUCCEEDED, per job
    submitted: list[Submitted] = field(default_factory=list)


def admit_all(world: Deployment) -> list[str]:
    accepted = [job_id for i in range(JOBS)
                for job_id in world.send(spec(name=f"train-{i}", spot=True, resources={"gpus": 1})).ids]
    records = world.receive()
    assert world.admit.handler({"Records": records}, CONTEXT) == {"batchItemFailures": []}
    store = DynamoDBStore(world.client("dynamodb"), NAMES)
    ids = [job.id for job in store.list()]
    assert ids == accepted
    return ids


def attempt_events(rng: random.Random, job: Submitted, now: float, run: Run, world: Deployment) -> list[dict]:
    """The events of one attempt, in the order Batch would emit them. A spot
    attempt may be reclaimed, before or after its RUNNING event; between
    attempts the job may have left a checkpoint."""
    started = now + rng.uniform(5, 30)
    reclaimed = job.spot and rng.random() < RECLAIM_CHANCE
    if reclaimed:
        run.reclaims[job.job_id] += 1
        if rng.random() < CHECKPOINT_CHANCE:
            uri = world.write_checkpoint(job.job_id, step=100 * job.attempt)
            run.checkpoint_at[(job.job_id, job.attempt + 1)] = uri
        ended = FakeBatch.event(job, "FAILED", at=started + rng.uniform(10, 200), started=started, reason=RECLAIM)
        if rng.random() < 0.3:
            return [ended]       # taken before its RUNNING event was emitted
        return [FakeBatch.event(job, "RUNNING", at=started, started=started), ended]
    return [FakeBatch.event(job, "RUNNING", at=started, started=started),
            FakeBatch.event(job, "SUCCEEDED", at=started + rng.uniform(10, 200), started=started, exit_code=0)]


def deliver(world: Deployment, event: dict, run: Run) -> dict[str, Any]:
    out = world.reconcile.handler(event, CONTEXT)
    if out.get("action") == "settled" and out.get("state") == "SUCCEEDED":
        run.succeeded[out["job_id"]] += 1
    return out


def play(seed: int, *, messy: bool) -> tuple[Run, dict[str, JobRecord]]:
    """The scenario; `messy`: every event is delivered twice, a third of the
    rounds in reverse order, and old events come again in later rounds."""
    rng = random.Random(seed)
    run = Run()
    with deployment(now=time.time()) as world:
        world.dispatch.container()          # the dispatcher's cold start registers the GPUs admission checks
        batch = FakeBatch(world.dispatch.container().compute.client)
        ids = admit_all(world)
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        old: list[dict] = []
        for _ in range(MAX_ROUNDS):
            if all(store.get(i).state == JobState.SUCCEEDED for i in ids):
                break
            world.dispatch.handler(WAKEUP_EVENT, CONTEXT)     # promotes due retries, then submits
            new = batch.take_new()
            rng.shuffle(new)
            events = [e for job in new for e in attempt_events(rng, job, world.clock.now(), run, world)]
            if messy:
                late = rng.sample(old, min(len(old), 5))
                old += events
                events = [e for e in events for _ in range(2)] + late
                if rng.random() < 0.35:
                    events.reverse()
            for event in events:
                deliver(world, event, run)
            world.clock.advance(ROUND)
        run.submitted = list(batch.submitted)
        return run, {i: store.get(i) for i in ids}     # read before the mock (and its tables) goes


def check(run: Run, jobs: dict[str, JobRecord]) -> None:
    ids = list(jobs)
    assert {i: j.state for i, j in jobs.items()} == {i: JobState.SUCCEEDED for i in ids}
    assert run.succeeded == Counter({i: 1 for i in ids})          # each settled as a success exactly once
    assert sum(run.reclaims.values()) > 0                          # the seed did inject reclaims
    # one Batch job per attempt: never a second SubmitJob for the same attempt
    attempts = [(s.job_id, s.attempt) for s in run.submitted]
    assert len(attempts) == len(set(attempts))
    assert len({s.batch_job_id for s in run.submitted}) == len(run.submitted)
    for i, job in jobs.items():
        assert (job.error_retries, job.reclaims) == (0, run.reclaims[i]), i
        assert job.attempts == run.reclaims[i] + 1
    # the attempt after a reclaim resumes from the checkpoint left before it (if any)
    for s in run.submitted:
        assert s.environment["GQA_RESUME_FROM"] == run.checkpoint_at.get((s.job_id, s.attempt), "")
    assert any(s.environment["GQA_RESUME_FROM"] for s in run.submitted)


def test_twenty_jobs_survive_spot_reclaims_and_each_succeeds_once():
    check(*play(seed=7, messy=False))


def test_duplicated_and_reordered_events_reach_the_same_outcome():
    check(*play(seed=11, messy=True))
