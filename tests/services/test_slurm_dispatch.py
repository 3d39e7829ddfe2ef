"""Slurm's scheduling options through the store and the supervisor (SQLite
store, fake compute): a --time-min job's granted wall time is recorded on its
attempt and enforced, CPU-only jobs take no GPU and no more CPUs than the
machine has, an exclusive job waits for an empty machine, --nice shows in
the queue's factors."""

from gqa.models.job import JobState
from gqa.models.outcome import TIMEOUT, attempt_deadline
from gqa.ports import Inventory
from tests.builders import gpus
from tests.services.conftest import T0
from tests.services.fakes import Launch

S = JobState


def test_a_time_min_job_is_backfilled_with_a_granted_wall_time_that_stops_it(queue):
    running = queue.start(resources={"gpus": 2}, limits={"wall_time": "100s"})   # GPUs 0-1 until T0+100
    head = queue.submit_one(resources={"gpus": 4}, limits={"wall_time": "1h"})    # reserved at T0+100
    long = queue.submit_one(limits={"wall_time": "1h", "time_min": "1m", "on_timeout": "requeue"})

    started = queue.supervisor.dispatch()

    assert [j.id for j in started] == [long.id]
    job = queue.get(long.id)
    assert (job.time_limit, job.wall_time, job.time_min) == (100.0, 3600, 60.0)
    assert "for 1m40s (--time-min" in [t.reason for t in job.history if t.state == S.STARTING][-1]
    assert attempt_deadline(job) == (T0 + 100, TIMEOUT)
    assert queue.state(head.id) == S.QUEUED

    queue.clock.advance(100)
    queue.supervisor.enforce_wall_time()
    assert queue.get(long.id).kill_reason == TIMEOUT
    [requeued] = queue.exit(long.id, None, 15)
    assert requeued.state == S.RETRY_WAIT
    assert requeued.reason.startswith("reached the wall time of 1m40s backfill granted it (--time-min)")

    # the next claim sets the attempt's own limit again: nothing is reserved now, so its whole wall time
    queue.exit(running.id, 0)
    queue.control.cancel([head.id])
    queue.supervisor.tick()
    again = queue.get(long.id)
    assert (again.state, again.attempts, again.time_limit) == (S.RUNNING, 2, None)
    assert attempt_deadline(again) == (again.started_at + 3600, TIMEOUT)


def test_cpu_only_jobs_take_no_gpu_and_no_more_cpus_than_the_machine_has(make_queue):
    queue = make_queue(1)
    queue.store.set_inventory(Inventory(gpus=gpus(1), cpus=4))
    gpu = queue.submit_one(resources={"cpus": 2})
    cpu_jobs = [queue.submit_one(resources={"gpus": 0}) for _ in range(2)]
    big = queue.submit_one(resources={"gpus": 0, "cpus": 4})

    queue.supervisor.dispatch()

    assert queue.compute.launches == [Launch(gpu.id, (0,), 1), *(Launch(j.id, (), 1) for j in cpu_jobs)]
    assert [t.reason for t in queue.get(cpu_jobs[0].id).history if t.state == S.STARTING] == \
        ["assigned no GPU (CPU only)"]
    [entry] = [e for e in queue.queries.queue().pending if e.job.id == big.id]
    assert entry.reason == "needs 4 CPUs, 0 free"     # 2 for the GPU job, 1 each for the CPU-only ones


def test_an_exclusive_job_waits_for_an_empty_machine_then_runs_alone(queue):
    first = queue.start(limits={"wall_time": "100s"})
    exclusive = queue.submit_one(resources={"exclusive": True})
    later = queue.submit_one(limits={"wall_time": "50s"})

    # the machine is reserved for it from T0+100: a job ending before then is backfilled
    assert [j.id for j in queue.supervisor.dispatch()] == [later.id]
    reasons = {e.job.id: e.reason for e in queue.queries.queue().pending}
    assert reasons[exclusive.id] == "waits for the machine to be empty (--exclusive): 2 jobs running"

    queue.exit(first.id, 0)
    queue.exit(later.id, 0)
    queue.submit_one()
    started = queue.supervisor.dispatch()
    assert [j.id for j in started] == [exclusive.id]
    reasons = {e.job.id: e.reason for e in queue.queries.queue().pending}
    assert list(reasons.values()) == [f"job {exclusive.id} has the machine to itself (--exclusive)"]


def test_nice_is_a_factor_the_queue_shows(make_queue):
    queue = make_queue(1)
    queue.start()
    plain = queue.submit_one()
    nice = queue.submit_one(nice=500)
    factors = {e.job.id: e.factors for e in queue.queries.queue().pending}
    assert (factors[plain.id].nice, factors[nice.id].nice) == (0.0, -0.05)
    assert [e.job.id for e in queue.queries.queue().pending] == [plain.id, nice.id]
