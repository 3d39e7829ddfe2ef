"""A dispatch pass killed at each of its AWS calls, through the real handlers
on moto: the pass's wake-up is delivered again, later (scheduled) passes and
Batch's events run, and every job ends SUCCEEDED, with one Batch job per
attempt, never two.

The calls are enumerated from a pass of the same shape (botocore
before-call/after-call hooks on the dispatcher's clients), so a pass that
gains or loses a call is covered without editing this file. The pass dies
just before every call, and just after every call that changes something
(SubmitJob, a transaction): the answer lost on its way back. Just after a
read is not run apart: nothing outside the process happens between one call
and the next, so it leaves what "just before the next call" leaves.

Where the dead pass left launches unrecorded, it runs twice more: with
Batch's events for them delivered at once (they record the launch) and
delivered only after the scheduled repair has run (which finds the attempt
on Batch by its job name and records it, so the late events change nothing)."""

from __future__ import annotations

import logging
import time
from unittest import mock
from collections.abc import Iterator

import pytest

from gqa.adapters.aws import views
from gqa.adapters.aws.batch_compute import parse_job_name
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.job import JobState
from gqa.services.repair import LAUNCH_GRACE
from tests.aws.fake_batch import CONTEXT, NAMES, POOLS, WAKEUP_EVENT, Deployment, FakeBatch, Submitted, deployment
from tests.aws.lambda_driver import SCHEDULE_EVENT, ContainerDied, Crash, Lambda, clients_of
from tests.builders import spec

pytestmark = [pytest.mark.aws, pytest.mark.slow]
JOBS = 2                        # one pass starts both (on-demand pool: 4 GPUs), one after the other
ROUND = LAUNCH_GRACE + 100      # virtual seconds between scheduled passes: each may repair what the last left
ROUNDS = 4
WRITES = frozenset({"batch.SubmitJob", "dynamodb.TransactWriteItems", "dynamodb.UpdateItem", "dynamodb.PutItem",
                    "dynamodb.BatchWriteItem", "dynamodb.DeleteItem", "sqs.SendMessage", "batch.TerminateJob"})


class World:
    """One deployment for every crash point: each scenario submits fresh jobs."""

    def __init__(self, world: Deployment):
        self.world = world
        dispatcher = world.dispatch.container()
        self.batch = FakeBatch(dispatcher.compute.client)
        self.crash = Crash()
        for client in clients_of(dispatcher):
            self.crash.attach(client)
        self.lam = Lambda(world)
        self.store = DynamoDBStore(world.client("dynamodb"), NAMES)
        self.scenarios = 0

    def submit(self) -> list[str]:
        self.scenarios += 1
        before = {j.id for j in self.store.list([JobState.QUEUED])}
        for i in range(JOBS):
            self.lam.send(spec(name=f"crash-{self.scenarios}-{i}", resources={"gpus": 1}))
        self.lam.admit(self.world.receive())
        return sorted({j.id for j in self.store.list([JobState.QUEUED])} - before)

    def pass_calls(self) -> list[str]:
        """The AWS calls of one wake-up pass that starts JOBS jobs (which then succeed)."""
        ids = self.submit()
        self.crash.calls, self.crash.armed = [], True
        self.world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        self.crash.armed = False
        self.settle(self.batch.take_new())
        assert self.states(ids) == {JobState.SUCCEEDED}
        return list(self.crash.calls)

    def crashed_pass(self, at: int, *, after: bool, events_late: bool) -> tuple[list[str], str]:
        """Submit, kill the pass at call `at`, then let Lambda and Batch go on until the jobs end."""
        ids = self.submit()
        crash = self.crash
        crash.calls, crash.at, crash.after, crash.armed, crash.fired = [], at, after, True, ""
        try:
            self.world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        except ContainerDied:
            pass                                         # (if it did not die, the test says so)
        # Batch emits events for what the dead pass submitted; EventBridge delivers them now or late
        held = self.batch.take_new()
        if not events_late:
            self.settle(held)
        self.lam.dispatch(WAKEUP_EVENT)                  # the wake-up, delivered again
        self.settle(self.batch.take_new())
        for _ in range(ROUNDS):
            if self.states(ids) == {JobState.SUCCEEDED}:
                break
            self.world.clock.advance(ROUND)
            self.lam.dispatch(SCHEDULE_EVENT)            # the schedule: repair, then a pass
            self.settle(self.batch.take_new())
            if events_late:
                self.settle(held)
                held = []
        return ids, crash.fired

    def settle(self, submitted: list[Submitted]) -> None:
        """Batch runs each submission to success; its events go to reconcile."""
        for job in submitted:
            started = self.world.clock.now() + 5
            for event in (FakeBatch.event(job, "RUNNING", at=started, started=started),
                          FakeBatch.event(job, "SUCCEEDED", at=started + 60, started=started, exit_code=0)):
                self.lam.reconcile(event)

    def states(self, ids: list[str]) -> set[JobState]:
        return {self.store.get(i).state for i in ids}

    def batch_jobs(self, job_id: str) -> list[tuple[str, int, str]]:
        """(job id, attempt, Batch job id) of every Batch job of this gqa job, from Batch itself."""
        batch = self.world.client("batch")
        out = []
        for pool in POOLS:
            listed = batch.list_jobs(jobQueue=pool.queue_name,
                                     filters=[{"name": "JOB_NAME", "values": [f"gqa-{job_id}-*"]}])
            for summary in listed["jobSummaryList"]:
                parsed = parse_job_name(summary["jobName"])
                if parsed and parsed[0] == job_id:
                    out.append((*parsed, summary["jobId"]))
        return out


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    logging.disable(logging.WARNING)      # the handlers' JSON lines, hundreds of passes of them
    try:
        with deployment(now=time.time()) as deployed, \
                mock.patch.object(deployed.dispatch, "SETTINGS_TTL", 0), \
                mock.patch.object(deployed.dispatch, "SAMPLES_TTL", 0), \
                mock.patch.object(views, "RESYNC_EVERY", 0), \
                mock.patch.object(deployed.dispatch, "KEYS_AFTER_COLD_START", 0):
            # caches off (the live jobs read whole by every pass, no upgrade's extra read of the
            # live index): every pass then makes the same calls, so the crash points enumerated
            # once hold for each scenario (a dead container loses its cache anyway)
            deployed.dispatch.container()          # the cold start registers the GPUs admission checks
            yield World(deployed)
    finally:
        logging.disable(logging.NOTSET)


def crash_points(calls: list[str]) -> list[tuple[int, bool, bool]]:
    """(call index, after it, events late): before every call, after every write,
    and with late events wherever a SubmitJob happened and the final record had not."""
    points = []
    for at, call in enumerate(calls):
        for after in (False, True):
            if after and call not in WRITES:
                continue
            done = calls[:at + after]
            unrecorded = "batch.SubmitJob" in done and len(done) < len(calls)
            points += [(at, after, False)] + ([(at, after, True)] if unrecorded else [])
    return points


def test_a_pass_killed_at_any_call_loses_no_job_and_submits_none_twice(world):
    calls = world.pass_calls()
    # the pass this enumerates: reads, the claim, then per job a checkpoint read and SubmitJob, then the record
    assert calls.count("batch.SubmitJob") == JOBS and calls[-1] == "dynamodb.TransactWriteItems"
    points = crash_points(calls)
    assert len(points) >= len(calls) + JOBS + 2
    failures = []
    for at, after, late in points:
        side = "after" if after else "before"
        where = f"{side} call {at} ({calls[at]}), events {'late' if late else 'at once'}"
        ids, fired = world.crashed_pass(at, after=after, events_late=late)
        if fired != f"{side} {calls[at]}":
            failures.append(f"{where}: the pass's calls changed; it died {fired or 'never'}")
            continue
        for i in ids:
            job, launched = world.store.get(i), world.batch_jobs(i)
            if job.state != JobState.SUCCEEDED:
                failures.append(f"{where}: job {i} ended {job.state} ({job.reason})")
            if len(launched) != 1:
                failures.append(f"{where}: job {i} went to Batch as {launched}")
            elif (job.attempts, job.proc_token) != (1, launched[0][2]):
                failures.append(f"{where}: job {i} recorded attempt {job.attempts} as {job.proc_token}, "
                                f"Batch ran {launched}")
            if [t.state for t in job.history].count(JobState.SUCCEEDED) != 1:
                failures.append(f"{where}: job {i} history {[t.state.value for t in job.history]}")
    assert not failures, "\n".join(failures)
    assert world.lam.redelivered["dispatch"] == 0       # the passes after the crash met no error
