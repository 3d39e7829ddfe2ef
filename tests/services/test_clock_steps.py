"""A wall clock set forward or back moves what is in flight with it
(services/clock_steps.py): a running attempt keeps its true age for its
wall time and its charge, and a retry's backoff keeps its length."""

import signal

import pytest

from gqa.models.job import JobState
from gqa.services.clock_steps import follow_clock
from tests.services.conftest import T0

S = JobState
HOURS_3 = 3 * 3600.0


class BootClock:
    """The machine's boot clock: it moves with time passing, never with the wall clock being set.
    Attempts began when the clock read what `starts` holds."""

    def __init__(self, queue):
        self.queue, self.boot, self.starts, self.asked = queue, 1000.0, {}, 0

    def advance(self, seconds):
        self.queue.clock.advance(seconds)
        self.boot += seconds

    def start(self, **spec):
        job = self.queue.start(**spec)
        self.starts[job.id] = self.boot
        return job

    def began(self, jobs, now):
        self.asked += 1
        return {j.id: now - (self.boot - self.starts[j.id]) for j in jobs if j.id in self.starts}


@pytest.fixture
def boot(queue):
    return BootClock(queue)


@pytest.mark.parametrize("step", [HOURS_3, -HOURS_3])
def test_a_running_attempt_keeps_its_age_across_a_step(queue, boot, step):
    job = boot.start(limits={"wall_time": "10m"})
    boot.advance(60)
    queue.clock.advance(step)   # set, not passing: the boot clock stays

    assert follow_clock(queue.store, boot, queue.clock.now(), step) == 1

    assert queue.get(job.id).started_at == T0 + step
    queue.supervisor.enforce_wall_time()
    assert queue.compute.terminated == []   # a minute in, not 3 h past its 10 minutes
    boot.advance(539)
    queue.supervisor.enforce_wall_time()
    assert queue.compute.terminated == []
    boot.advance(1)
    queue.supervisor.enforce_wall_time()
    assert [j for j, _ in queue.compute.terminated] == [job.id]
    queue.exit(job.id, None, signal.SIGTERM)
    done = queue.get(job.id)
    assert (done.state, done.gpu_seconds) == (S.TIMED_OUT, 600.0)   # charged its 10 minutes, not the step


def test_without_following_the_step_a_job_a_minute_in_is_stopped_as_past_its_wall_time(queue, boot):
    """What the rule prevents: the same step, not followed."""
    job = boot.start(limits={"wall_time": "10m"})
    boot.advance(60)
    queue.clock.advance(HOURS_3)

    queue.supervisor.enforce_wall_time()

    assert [j for j, _ in queue.compute.terminated] == [job.id]


def test_a_step_made_while_the_daemon_was_down_is_found_from_the_attempts_own_start(queue, boot):
    job = boot.start(resources={"gpus": 2})
    boot.advance(120)
    queue.clock.advance(HOURS_3)

    assert follow_clock(queue.store, boot, queue.clock.now()) == 1   # no step seen: the starts tell
    boot.advance(30)
    queue.exit(job.id, 0)

    assert queue.get(job.id).gpu_seconds == 2 * 150.0


def test_following_is_idempotent_and_leaves_attempts_that_match_alone(queue, boot):
    stepped = boot.start()
    boot.advance(10)
    queue.clock.advance(-HOURS_3)
    late = boot.start()   # started after the step: on the clock as it is now
    boot.advance(5)

    assert follow_clock(queue.store, boot, queue.clock.now(), -HOURS_3) == 1
    assert follow_clock(queue.store, boot, queue.clock.now()) == 0

    assert queue.get(stepped.id).started_at == T0 - HOURS_3
    assert queue.get(late.id).started_at == T0 + 10 - HOURS_3


def test_a_start_within_the_launch_latency_is_not_rewritten(queue, boot):
    job = boot.start()
    boot.starts[job.id] -= 1.5   # forked 1.5 s before its start was stamped, on a loaded machine

    assert follow_clock(queue.store, boot, queue.clock.now()) == 0
    assert queue.get(job.id).started_at == T0


def test_an_attempt_the_backend_cannot_place_keeps_its_recorded_start(queue, boot):
    job = queue.start()   # not on the boot clock: its process is gone, its end not settled yet
    queue.clock.advance(HOURS_3)

    assert follow_clock(queue.store, boot, queue.clock.now(), HOURS_3) == 0
    assert queue.get(job.id).started_at == T0


@pytest.mark.parametrize("step", [-HOURS_3, HOURS_3])
def test_a_retrys_backoff_keeps_its_length(queue, boot, step):
    job = boot.start(retries={"on_error": 2, "backoff": "1m"})
    queue.exit(job.id, 3)
    waiting = queue.get(job.id)
    assert waiting.state == S.RETRY_WAIT and waiting.not_before == T0 + 30
    queue.clock.advance(step)

    follow_clock(queue.store, boot, queue.clock.now(), step)

    assert queue.get(job.id).not_before == T0 + 30 + step
    queue.clock.advance(29)
    queue.supervisor.promote_retries()
    assert queue.state(job.id) == S.RETRY_WAIT   # not an hour early, not three hours late
    queue.clock.advance(1)
    queue.supervisor.promote_retries()
    assert queue.state(job.id) == S.QUEUED


def test_nothing_running_asks_nothing(queue, boot):
    assert follow_clock(queue.store, boot, queue.clock.now(), HOURS_3) == 0
    assert boot.asked == 0
