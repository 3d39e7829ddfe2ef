"""A launch that is not a start (AWS Batch: a submitted job waits RUNNABLE for
an instance), over the SQLite store with fake compute that says so: the job
stays STARTING with its launch recorded until Batch's RUNNING event, and
until then uses no wall time, costs nothing, adds no fair-share usage and
says what it waits for; it still holds its GPUs; a cancel reaches its Batch
job; the queue's capacity wait ends it as a capacity retry, never as the
job's own failure. The local backend (a launch is a start) is unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gqa.adapters.local.budget_records import SqliteBudgetRecords
from gqa.models.batch_events import BatchJobEvent
from gqa.models.job import JobRecord, JobState, Transition
from gqa.ports import Inventory
from gqa.scheduling import Gpu, TeamPolicy
from gqa.scheduling.budget import period_of
from gqa.services.budget_watch import BudgetWatch
from gqa.services.cost import CostService
from gqa.services.launched import awaiting_start, minutes, waiting_reason
from gqa.services.reconcile import Action, ReconcileService
from gqa.services.snapshot import read_snapshot
from tests.builders import job_record
from tests.services.conftest import T0
from tests.services.fakes import RecordingNotifier

S = JobState
HOUR = 3600.0
PRICE = 2.0
ON_DEMAND = Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4)))
MIXED = Inventory(gpus=(Gpu(0, "a10g", 0.4, spot=True), Gpu(1, "a10g", 1.2)))
ESSENTIAL = "Essential container in task exited"
# what the job queue's job state time limit action says (infra/compute.py, compute.capacity_wait)
CAPACITY_WAIT = "Canceled by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"


@pytest.fixture
def batch(queue):
    """The queue as on AWS: launches wait for the backend, events come through reconcile."""
    queue.compute.launch_is_start = False
    queue.store.set_inventory(ON_DEMAND)
    return ReconcileService(queue.store, queue.rng)


def launch(queue, **spec) -> JobRecord:
    job = queue.submit_one(**spec)
    started = queue.supervisor.dispatch()
    assert [j.id for j in started] == [job.id]
    return queue.get(job.id)


def event(job: JobRecord, status: str, *, at: float, started: float | None = None, reason: str | None = None,
          code: int | None = None) -> BatchJobEvent:
    return BatchJobEvent(job.proc_token or "", job.id, job.attempts, status, reason, code, None, at,
                         started_at=started)


def test_a_launched_attempt_stays_starting_with_its_launch_recorded(queue, batch):
    job = launch(queue, limits={"wall_time": "1h"})

    assert (job.state, job.attempts, job.pid, job.proc_token) == (S.STARTING, 1, 1001, "token-1001")
    assert job.started_at is None
    assert job.reason == "attempt 1 launched as token-1001; waiting for the compute backend to start it"
    assert [t.state for t in job.history] == [S.SUBMITTED, S.QUEUED, S.STARTING]
    assert queue.compute.launches[0].attempt == 1
    assert queue.supervisor.dispatch() == [] and len(queue.compute.launches) == 1    # never launched twice


def test_the_local_backend_still_records_its_launch_as_the_start(queue):
    job = queue.start()
    assert (job.state, job.started_at, job.reason) == (S.RUNNING, T0, "attempt 1 started")


def test_wall_time_counts_from_batchs_start_not_from_the_launch(queue, batch):
    job = launch(queue, limits={"wall_time": "1h"})
    queue.clock.advance(3 * HOUR)                 # three hours RUNNABLE: no wall time used
    queue.supervisor.tick()
    assert queue.compute.terminated == []
    assert queue.supervisor.next_deadline() is None

    assert batch.handle(event(job, "RUNNING", at=T0 + 3 * HOUR, started=T0 + 3 * HOUR)).action == Action.RUNNING
    running = queue.get(job.id)
    assert (running.state, running.started_at, running.history[-1].at) == (S.RUNNING, T0 + 3 * HOUR, T0 + 3 * HOUR)
    assert queue.supervisor.next_deadline() == T0 + 4 * HOUR
    queue.clock.advance(HOUR - 1)
    queue.supervisor.enforce_wall_time()
    assert queue.compute.terminated == []
    queue.clock.advance(1)
    queue.supervisor.enforce_wall_time()
    assert [t[0] for t in queue.compute.terminated] == [job.id]


def test_a_job_batch_never_starts_is_charged_nothing_and_not_timed_out(queue, batch, tmp_path):
    queue.store.set_team("default", TeamPolicy(budget=1000.0))
    job = launch(queue, resources={"gpus": 2}, limits={"wall_time": "1h"})
    queue.clock.advance(2 * HOUR)
    now = queue.clock.now()

    assert queue.store.usage(now, queue.store.policy().half_life).get(job.team, 0.0) == 0.0   # fair share
    assert read_snapshot(queue.store, now).spend.get(job.team, 0.0) == 0.0                   # scheduling budget
    assert CostService(queue.store, queue.clock).report(team=job.team).teams[0].running == 0.0
    watch = BudgetWatch(queue.store, SqliteBudgetRecords(tmp_path / "budget.db"), RecordingNotifier(), queue.clock)
    assert watch.tick().spend[job.team].running == 0.0                                        # live spend
    queue.supervisor.tick()
    assert queue.state(job.id) == S.STARTING and queue.compute.terminated == []

    # the queue's capacity wait cancels it: no container ever ran
    result = batch.handle(event(job, "FAILED", at=now, reason=CAPACITY_WAIT))
    ended = queue.get(job.id)
    assert (result.action, result.cause, result.gpu_seconds, result.cost) == (Action.SETTLED, "capacity", 0.0, 0.0)
    assert (ended.state, ended.gpu_seconds, ended.error_retries, ended.capacity_failures) == (S.RETRY_WAIT, 0.0, 0, 1)
    assert S.RUNNING not in [t.state for t in ended.history]
    assert queue.store.spend(period_of(now)) == {}


def test_batchs_start_charges_from_then_to_its_stop(queue, batch):
    job = launch(queue)
    start, stop = T0 + HOUR, T0 + HOUR + 600
    batch.handle(event(job, "RUNNING", at=start, started=start))
    queue.clock.advance(HOUR + 60)
    assert CostService(queue.store, queue.clock).report(team=job.team).teams[0].running == \
        pytest.approx(PRICE * 60 / HOUR)
    batch.handle(event(job, "SUCCEEDED", at=stop, started=start, reason=ESSENTIAL, code=0))
    done = queue.get(job.id)
    assert (done.state, done.gpu_seconds) == (S.SUCCEEDED, pytest.approx(600.0))
    assert queue.store.spend(period_of(T0)) == {job.team: pytest.approx(PRICE * 600 / HOUR)}


def test_an_end_before_any_running_event_writes_the_start_first_when_it_ran(queue, batch):
    job = launch(queue)
    batch.handle(event(job, "SUCCEEDED", at=T0 + 700, started=T0 + 100, reason=ESSENTIAL, code=0))
    done = queue.get(job.id)
    assert [t.state for t in done.history][-2:] == [S.RUNNING, S.SUCCEEDED]
    assert (done.started_at, done.gpu_seconds) == (T0 + 100, pytest.approx(600.0))


@pytest.mark.parametrize("waited, text", [(0, "0 min"), (720, "12 min"), (3 * HOUR + 300, "3 h 05 min")])
def test_minutes(waited, text):
    assert minutes(waited) == text


CLAIMED = (Transition(S.QUEUED, T0 - 900, "queued"), Transition(S.STARTING, T0 - 720, "assigned GPUs 0"))


@pytest.mark.parametrize("job, inventory, reason", [
    (job_record(state=S.STARTING, assigned=(0,), attempts=2, proc_token="b-1", history=CLAIMED), MIXED,
     "waiting for spot capacity in pool a10g-spot, 12 min (attempt 2 launched as b-1)"),
    (job_record(state=S.STARTING, assigned=(1,), attempts=1, proc_token="b-1", history=CLAIMED), MIXED,
     "waiting for on-demand capacity in pool a10g-ondemand, 12 min (attempt 1 launched as b-1)"),
    (job_record(state=S.STARTING, assigned=(0,), attempts=1, proc_token="b-1", history=CLAIMED), None,
     "waiting for capacity, 12 min (attempt 1 launched as b-1)"),                  # no inventory to name the pool
    (job_record(state=S.STARTING, assigned=(0,), attempts=1, proc_token="b-1"), MIXED,
     "waiting for spot capacity in pool a10g-spot (attempt 1 launched as b-1)"),   # no history to time the wait
], ids=["spot", "on-demand", "no-inventory", "no-history"])
def test_what_a_launched_job_waits_for(job, inventory, reason):
    assert awaiting_start(job)
    assert waiting_reason(job, inventory, T0) == reason


@pytest.mark.parametrize("job", [job_record(state=S.STARTING), job_record(state=S.RUNNING, proc_token="b-1")],
                         ids=["claimed-launch-unrecorded", "running"])
def test_only_a_recorded_launch_waits_for_its_backend(job):
    assert not awaiting_start(job)


def test_status_and_queue_say_what_a_launched_job_waits_for_with_the_numbers(queue, batch):
    queue.store.set_inventory(MIXED)
    job = launch(queue, spot=True)
    assert MIXED.gpus[job.assigned[0]].spot
    queue.clock.advance(12 * 60 + 30)
    why = "waiting for spot capacity in pool a10g-spot, 12 min (attempt 1 launched as token-1001)"

    [seen] = queue.queries.jobs(job.id)
    assert seen.reason == why
    assert seen.history == queue.get(job.id).history                     # status still shows all of it
    [polled] = queue.queries.jobs(job.id, history=False)                  # gqa wait: the wait still timed
    assert (polled.reason, polled.history) == (why, ())
    view = queue.queries.queue()
    assert [(j.id, j.reason, j.history) for j in view.running] == [(job.id, why, ())]

    on_demand = launch(queue)
    [seen] = queue.queries.jobs(on_demand.id)
    assert seen.reason.startswith("waiting for on-demand capacity in pool a10g-ondemand, 0 min")


def test_a_launched_job_still_holds_its_gpus(queue, batch):
    launch(queue, resources={"gpus": 2})
    big = queue.submit_one(resources={"gpus": 4})

    assert queue.supervisor.dispatch() == []
    assert queue.state(big.id) == S.QUEUED
    view = queue.queries.queue()
    assert (view.total_gpus, view.free_gpus) == (4, 2)


@pytest.mark.parametrize("act", ["cancel", "preempt"])
def test_stopping_a_launched_job_stops_its_batch_job_and_charges_nothing(queue, batch, act):
    job = launch(queue, priority="low", resources={"gpus": 4})
    terminated: list[str | None] = []
    queue.compute.terminate = lambda j, grace: terminated.append(j.proc_token)
    if act == "cancel":
        queue.control.cancel([job.id])
        queue.supervisor.tick()
    else:
        queue.store.set_policy(replace(queue.store.policy(), preempt_tiers=(2,)))   # low may make way
        queue.submit_one(priority="high", resources={"gpus": 4})
        queue.supervisor.tick()
    assert terminated == ["token-1001"]
    stopped = queue.get(job.id)
    assert (stopped.state, stopped.kill_reason) == (S.STARTING, act)

    # Batch's TerminateJob ends it before it ever ran
    batch.handle(event(stopped, "FAILED", at=T0 + 5, reason=f"gqa: {act}"))
    ended = queue.get(job.id)
    assert ended.state == (S.CANCELLED if act == "cancel" else S.RETRY_WAIT)
    assert (ended.gpu_seconds, ended.error_retries) == (0.0, 0)


def test_waiting_past_the_capacity_wait_again_and_again_falls_back_to_on_demand(queue, batch):
    queue.store.set_inventory(MIXED)
    job = queue.submit_one(spot=True, retries={"on_capacity": 2}, resources={"gpu_type": "a10g"})
    placed = []
    for _ in range(4):
        queue.clock.advance(HOUR)                  # past any backoff
        queue.supervisor.promote_retries()
        [launched] = queue.supervisor.dispatch()
        assert launched.state == S.STARTING
        placed.append(MIXED.gpus[launched.assigned[0]].spot)
        queue.clock.advance(4 * HOUR)              # compute.capacity_wait
        batch.handle(event(launched, "FAILED", at=queue.clock.now(), reason=CAPACITY_WAIT))

    assert placed == [True, True, True, False]
    ended = queue.get(job.id)
    assert (ended.state, ended.spot, ended.error_retries, ended.gpu_seconds) == (S.RETRY_WAIT, False, 0, 0.0)
    assert any("falls back to on demand" in t.reason for t in ended.history)
    assert all(t.state != S.FAILED for t in ended.history)
