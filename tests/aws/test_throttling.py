"""The whole lifecycle (API send -> admit -> dispatch -> Batch events ->
reconcile, with spot reclaims) while AWS refuses calls for rate: on the first
try of every call, and at random with a seed. Where gqa's retries run out,
the handler fails and Lambda delivers its input again (lambda_driver.py).
Every job still ends SUCCEEDED exactly once, no attempt goes to Batch twice."""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from unittest import mock

import boto3
import pytest
from botocore.exceptions import ClientError

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.errors import Retrying
from gqa.models.job import JobState
from tests.aws.fake_batch import CONTEXT, NAMES, REGION, WAKEUP_EVENT, FakeBatch, deployment
from tests.aws.lambda_driver import SCHEDULE_EVENT, Lambda, Throttle
from tests.aws.test_lifecycle import Run, attempt_events
from tests.builders import spec

pytestmark = [pytest.mark.aws, pytest.mark.slow]
JOBS = 8
ROUND = 1000.0          # past the longest backoff (600 s), and past the repair's grace (900 s)
MAX_ROUNDS = 40


def play(throttle_kwargs: dict, seed: int) -> tuple[Run, dict, Throttle, Lambda]:
    rng = random.Random(seed)
    run = Run()
    session = boto3.session.Session(region_name=REGION)
    throttle = Throttle(session, seed=seed, **throttle_kwargs)   # before the cold starts: every client has it
    logging.disable(logging.WARNING)
    # virtual time: gqa's retries back off without sleeping
    with mock.patch.object(Retrying, "delay", lambda self, retry: 0.0), \
            deployment(now=time.time(), session=session) as world:
        lam = Lambda(world, faults=throttle.on)
        dispatcher = world.dispatch.container()       # cold starts, unthrottled: configuration, not traffic
        world.admit.container()
        world.reconcile.container()
        batch = FakeBatch(dispatcher.compute.client)
        for i in range(JOBS):
            lam.send(spec(name=f"train-{i}", spot=True, resources={"gpus": 1}))
        lam.admit(world.receive())
        store = DynamoDBStore(world.client("dynamodb"), NAMES)
        ids = [j.id for j in store.list()]
        for n in range(MAX_ROUNDS):
            if all(store.get(i).state == JobState.SUCCEEDED for i in ids):
                break
            lam.dispatch(SCHEDULE_EVENT if n % 2 else WAKEUP_EVENT)
            for job in batch.take_new():
                for event in attempt_events(rng, job, world.clock.now(), run, world):
                    out = lam.reconcile(event)
                    if out.get("action") == "settled" and out.get("state") == "SUCCEEDED":
                        run.succeeded[out["job_id"]] += 1
            world.clock.advance(ROUND)
        run.submitted = list(batch.submitted)
        jobs = {i: store.get(i) for i in ids}
    logging.disable(logging.NOTSET)
    return run, jobs, throttle, lam


def check(run: Run, jobs: dict, throttle: Throttle) -> None:
    assert len(jobs) == JOBS                                       # every submission admitted, once
    assert {i: j.state for i, j in jobs.items()} == {i: JobState.SUCCEEDED for i in jobs}
    assert run.succeeded == Counter({i: 1 for i in jobs})
    for i, job in jobs.items():
        assert [t.state for t in job.history].count(JobState.SUCCEEDED) == 1
        assert (job.error_retries, job.reclaims, job.attempts) == (0, run.reclaims[i], run.reclaims[i] + 1), i
    attempts = [(s.job_id, s.attempt) for s in run.submitted]
    assert len(attempts) == len(set(attempts))                     # never a second SubmitJob for an attempt
    assert sum(run.reclaims.values()) > 0
    refused = {service for service, _, _ in throttle.refused}
    assert refused >= {"dynamodb", "sqs", "s3", "batch"}, refused
    codes = {code for _, _, code in throttle.refused}
    assert {"ThrottlingException", "ProvisionedThroughputExceededException"} <= codes


def test_every_call_refused_on_its_first_try():
    run, jobs, throttle, lam = play({"first_try": True}, seed=3)
    check(run, jobs, throttle)
    # every operation the lifecycle used was refused once per call: as many refusals as successes
    for (service, operation), passed in throttle.passed.items():
        refused = sum(n for (s, o, _), n in throttle.refused.items() if (s, o) == (service, operation))
        assert refused >= passed, (service, operation, refused, passed)


def test_calls_refused_at_random_past_the_retry_budget_are_delivered_again():
    run, jobs, throttle, lam = play({"chance": 0.5}, seed=6)
    check(run, jobs, throttle)
    assert sum(lam.redelivered.values()) > 0, "no retry budget ran out: raise the chance"


def test_a_submission_whose_write_landed_but_whose_answer_was_lost_is_admitted_once():
    """Throttled past every retry on the way back: the jobs are written, the
    handler fails, SQS delivers the message again, and create-if-absent on the
    reserved ids makes the second delivery a no-op."""
    with deployment(now=time.time()) as world:
        world.dispatch.container()
        wiring = world.admit.container()
        lost: list[str] = []

        def lose_answer(http_response, parsed, **_):
            if len(lost) < 5:      # the adapter's whole retry budget
                lost.append("TransactWriteItems")
                raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                                  "TransactWriteItems")
        wiring.store.client.meta.events.register("after-call.dynamodb.TransactWriteItems", lose_answer)
        accepted = world.send(spec(name="once")).first
        records = world.receive()
        failed = world.admit.handler({"Records": records}, CONTEXT)
        assert len(failed["batchItemFailures"]) == 1 and lost
        world.admit.handler({"Records": records}, CONTEXT)    # SQS delivers the message again
        jobs = DynamoDBStore(world.client("dynamodb"), NAMES).list()
        assert [j.id for j in jobs] == [accepted.id] and jobs[0].state == JobState.QUEUED
