"""A dispatch pass with a deadline (services/pacing.py): over a compute whose
every launch takes a set time on the injected clock, as SubmitJob takes
150-300 ms on AWS Batch, the pass begins no launch at or past its deadline,
records its launches a batch at a time, leaves the rest queued for the next
pass and wakes it. Without a deadline, a pass starts all it decides."""

from __future__ import annotations

import pytest

from gqa.models.job import JobState
from gqa.services.supervisor import OUT_OF_TIME, Supervisor
from tests.services.conftest import GRACE, T0
from tests.services.fakes import CountingWaker

S = JobState
BATCH = 10


class Killed(BaseException):
    """The Lambda function reaching its timeout: the process ends where it is."""


class SlowLaunches:
    """Each launch takes `seconds[n]` (the last one for the rest) on the queue's clock; `kill_at`:
    the launch (counted from 1) during which the process is killed."""

    def __init__(self, queue, *seconds: float, kill_at: int | None = None):
        self.queue, self.seconds, self.kill_at = queue, seconds, kill_at
        self.began: list[float] = []
        self.launch = queue.compute.launch

    def __call__(self, job, gpus, attempt):
        self.began.append(self.queue.clock.now())
        n = len(self.began)
        self.queue.clock.advance(self.seconds[min(n, len(self.seconds)) - 1])
        if n == self.kill_at:
            raise Killed()
        return self.launch(job, gpus, attempt)


@pytest.fixture
def batch_queue(make_queue, monkeypatch):
    """64 GPUs on AWS Batch's terms (a launch is not a start, claims written before launching),
    50 one-GPU jobs queued, and a supervisor as the dispatch function wires it."""
    queue = make_queue(64)
    queue.compute.launch_is_start = False
    queue.jobs = [queue.submit_one(name=f"j{i}").id for i in range(50)]
    queue.wakes = CountingWaker()
    queue.supervisor = Supervisor(queue.store, queue.compute, queue.clock, queue.rng, grace=GRACE,
                                  launch_batch=BATCH, waker=queue.wakes)
    return queue


def states(queue) -> dict[JobState, int]:
    out: dict[JobState, int] = {}
    for job_id in queue.jobs:
        state = queue.state(job_id)
        out[state] = out.get(state, 0) + 1
    return out


def test_a_pass_stops_launching_at_its_deadline_with_every_launch_recorded(batch_queue, monkeypatch):
    queue = batch_queue
    slow = SlowLaunches(queue, 0.3)
    monkeypatch.setattr(queue.compute, "launch", slow)
    until = T0 + 5.0

    started = queue.supervisor.tick(until)

    # 10 (a batch), then as many as fit in the 2 s left at 0.3 s each (6), then one more begun before it
    assert slow.began and max(slow.began) < until
    assert len(started) == len(slow.began) == 17
    # each launch recorded, with its Batch job, as it stands in the store
    assert {(j.id, j.attempts, j.proc_token) for j in started} == \
        {(j.id, j.attempts, j.proc_token) for j in map(queue.get, queue.jobs) if j.proc_token}
    assert states(queue) == {S.STARTING: 17, S.QUEUED: 33}       # nothing claimed that was not launched
    assert queue.clock.now() - until < 0.3 + 1e-9                 # over only by the last launch's own time
    assert queue.wakes.wakes == 1                                 # the next pass is woken for the rest

    # the next pass, with a deadline of its own, goes on from there
    started = queue.supervisor.tick(queue.clock.now() + 30.0)
    assert len(started) == 33 and states(queue) == {S.STARTING: 50}
    assert queue.wakes.wakes == 1


def test_a_pass_killed_at_its_timeout_loses_the_records_of_one_batch_at_most(batch_queue, monkeypatch):
    queue = batch_queue
    monkeypatch.setattr(queue.compute, "launch", SlowLaunches(queue, 0.3, kill_at=25))

    with pytest.raises(Killed):
        queue.supervisor.tick(T0 + 60.0)

    recorded = [queue.get(j) for j in queue.jobs if queue.get(j).proc_token]
    assert len(recorded) == 20 and all(j.state == S.STARTING and j.attempts == 1 for j in recorded)
    # the killed batch: claimed, launches unrecorded (the repair asks Batch for them); the rest untouched
    assert states(queue) == {S.STARTING: 30, S.QUEUED: 20}


def test_launches_slower_than_the_batch_was_sized_for_hand_their_claims_back(batch_queue, monkeypatch):
    queue = batch_queue
    # fast at first, so the second batch is sized for it; then each launch takes 2 s
    slow = SlowLaunches(queue, *[0.25] * 10, 2.0)
    monkeypatch.setattr(queue.compute, "launch", slow)
    until = T0 + 5.0

    started = queue.supervisor.tick(until)

    assert max(slow.began) < until
    assert len(started) == len(slow.began) == 12      # 10 at 0.25 s, then 2 of the next batch at 2 s
    back = [queue.get(j) for j in queue.jobs if queue.state(j) == S.RETRY_WAIT]
    assert len(back) == BATCH - 2
    assert all((j.reason, j.attempts, j.assigned, j.not_before, j.proc_token) ==
               (OUT_OF_TIME, 0, (), j.history[-1].at, None) for j in back)
    assert queue.wakes.wakes == 1
    # the next pass brings them back to the queue and launches them: none ran, none launched twice
    queue.supervisor.tick(queue.clock.now() + 100.0)
    assert states(queue) == {S.STARTING: 50}
    assert len(slow.began) == len({(launch.job_id, launch.attempt) for launch in queue.compute.launches}) == 50


def test_a_gated_launcher_past_its_deadline_claims_nothing_it_did_not_launch(batch_queue, monkeypatch):
    queue = batch_queue
    queue.compute.holds_launches, queue.compute.launch_is_start = True, True     # local processes, held
    slow = SlowLaunches(queue, 0.1, 3.0)
    monkeypatch.setattr(queue.compute, "launch", slow)

    started = queue.supervisor.tick(T0 + 2.0)

    assert len(started) == 2 and states(queue) == {S.RUNNING: 2, S.QUEUED: 48}
    assert sorted(queue.compute.released) == sorted(j.id for j in started) and queue.compute.abandoned == []


def test_without_a_deadline_a_pass_starts_all_it_decides(batch_queue, monkeypatch):
    queue = batch_queue
    monkeypatch.setattr(queue.compute, "launch", SlowLaunches(queue, 0.3))

    assert len(queue.supervisor.tick()) == 50
    assert states(queue) == {S.STARTING: 50} and queue.wakes.wakes == 0
