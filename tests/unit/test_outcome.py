"""gqa.models.outcome.decide: what an ended attempt means for the job, and
gqa.models.outcome.backoff_delay."""

import signal

import pytest

from tests.builders import job_record
from gqa.models.job import JobState, Request
from gqa.models.outcome import (CANCEL, GPU_HOURS, PREEMPT, REQUEUE, SHUTDOWN, TIMEOUT, ExitKind, backoff_delay,
                                decide, describe_exit)

NOW = 5000.0
S = JobState


def running_job(*, on_error=0, error_retries=0, interruptions=0, wall_time=None, on_timeout="stop",
                backoff="10s", max_backoff="10m", **fields):
    spec = {"retries": {"on_error": on_error, "backoff": backoff, "max_backoff": max_backoff},
            "limits": {"wall_time": wall_time, "on_timeout": on_timeout}}
    return job_record(spec=spec, state=S.RUNNING, error_retries=error_retries, interruptions=interruptions,
                      pid=4242, assigned=(0, 1), attempts=error_retries + interruptions + 1, **fields)


@pytest.mark.parametrize("job, code, sig, to, reason", [
    (running_job(), 0, None, S.SUCCEEDED, "exit code 0"),
    (running_job(), 1, None, S.FAILED, "exit code 1"),
    (running_job(on_error=2, error_retries=2), 3, None, S.FAILED, "exit code 3 after 2 retries"),
    (running_job(), 137, None, S.FAILED, "exit code 137 (SIGKILL)"),
    (running_job(), None, signal.SIGKILL, S.FAILED,
     "killed by SIGKILL (not sent by gqa: most often the kernel's out-of-memory killer)"),
    (running_job(), None, signal.SIGSEGV, S.FAILED, "killed by SIGSEGV"),
    (running_job(request=Request.CANCEL, kill_reason=CANCEL), None, signal.SIGTERM, S.CANCELLED, "cancelled by user"),
    (running_job(kill_reason=CANCEL), 0, None, S.CANCELLED, "cancelled by user"),
    (running_job(request=Request.REQUEUE, kill_reason=REQUEUE), None, signal.SIGTERM, S.RETRY_WAIT,
     "requeued by user"),
    (running_job(kill_reason=REQUEUE), 1, None, S.RETRY_WAIT, "requeued by user; resumes from its last checkpoint"),
    (running_job(kill_reason=SHUTDOWN), None, signal.SIGTERM, S.RETRY_WAIT, "queue daemon stopped"),
    # exit 0 while asked to make way: it finished (sending it back would run it twice)
    (running_job(kill_reason=SHUTDOWN), 0, None, S.SUCCEEDED, "finished while being asked to stop"),
    (running_job(kill_reason=PREEMPT), 0, None, S.SUCCEEDED, "finished while being asked to stop"),
    (running_job(request=Request.REQUEUE, kill_reason=REQUEUE), 0, None, S.SUCCEEDED,
     "finished while being asked to stop"),
    (running_job(kill_reason=TIMEOUT, wall_time="1h"), None, signal.SIGTERM, S.TIMED_OUT,
     "exceeded its wall time of 1h00m"),
    (running_job(kill_reason=TIMEOUT, wall_time="1h", on_timeout="requeue"), None, signal.SIGTERM, S.RETRY_WAIT,
     "reached its wall time of 1h00m; requeued to resume from its last checkpoint"),
    (running_job(), None, None, S.RETRY_WAIT, "its process was lost while the queue daemon was down"),
])
def test_decide(job, code, sig, to, reason):
    outcome = decide(job, code=code, sig=sig, now=NOW, draw=0.5)
    assert outcome.to == to
    assert reason in outcome.reason
    assert outcome.fields["pid"] is None
    assert outcome.fields["assigned"] == ()
    assert outcome.fields["request"] is None and outcome.fields["kill_reason"] is None
    assert (outcome.fields["exit_code"], outcome.fields["signal"]) == (code, sig)


@pytest.mark.parametrize("job, code, to, recorded", [
    # the batch shell died of the signal gqa sent and its wrapper said 128 + N: the signal, as Slurm's 0:15
    (running_job(kill_reason=SHUTDOWN), 143, S.RETRY_WAIT, (None, signal.SIGTERM)),
    (running_job(kill_reason=PREEMPT), 143, S.RETRY_WAIT, (None, signal.SIGTERM)),
    (running_job(kill_reason=TIMEOUT, wall_time="1h"), 143, S.TIMED_OUT, (None, signal.SIGTERM)),
    (running_job(request=Request.CANCEL, kill_reason=CANCEL), 137, S.CANCELLED, (None, signal.SIGKILL)),
    # any other code of a stopped attempt is its own, and so is a 143 nobody asked for
    (running_job(kill_reason=REQUEUE), 1, S.RETRY_WAIT, (1, None)),
    (running_job(kill_reason=CANCEL), 130, S.CANCELLED, (130, None)),
    (running_job(), 143, S.FAILED, (143, None)),
])
def test_a_stopped_attempts_143_or_137_is_recorded_as_the_signal_gqa_sent(job, code, to, recorded):
    outcome = decide(job, code=code, sig=None, now=NOW, draw=0.5)
    assert outcome.to == to
    assert (outcome.fields["exit_code"], outcome.fields["signal"]) == recorded


@pytest.mark.parametrize("job, code, sig", [
    (running_job(request=Request.REQUEUE, kill_reason=REQUEUE), None, signal.SIGTERM),
    (running_job(kill_reason=SHUTDOWN, error_retries=1, on_error=3), None, signal.SIGTERM),
    (running_job(kill_reason=TIMEOUT, wall_time="1h", on_timeout="requeue", interruptions=2), None, signal.SIGTERM),
    (running_job(error_retries=1, on_error=1), None, None),       # lost: never an error, even with no retries left
])
def test_interruptions_are_not_errors(job, code, sig):
    outcome = decide(job, code=code, sig=sig, now=NOW, draw=0.9)
    assert outcome.to == S.RETRY_WAIT
    assert outcome.fields["interruptions"] == job.interruptions + 1
    assert outcome.fields.get("error_retries", job.error_retries) == job.error_retries
    assert outcome.fields["not_before"] == NOW        # no backoff for an interruption
    assert outcome.fields["ended_at"] is None


@pytest.mark.parametrize("on_error, error_retries, backoff, max_backoff, draw", [
    (1, 0, "10s", "10m", 0.0),
    (3, 0, "10s", "10m", 0.5),
    (3, 2, "10s", "10m", 0.999),
    (5, 4, "1m", "2m", 0.999),     # 1m * 2**4 is over the cap
])
def test_error_with_retries_left(on_error, error_retries, backoff, max_backoff, draw):
    job = running_job(on_error=on_error, error_retries=error_retries, backoff=backoff, max_backoff=max_backoff)
    outcome = decide(job, code=1, sig=None, now=NOW, draw=draw)
    n = error_retries + 1
    spec = job.spec.retries
    cap = min(spec.max_backoff, spec.backoff * 2 ** (n - 1))
    assert outcome.to == S.RETRY_WAIT
    assert outcome.reason.startswith(f"exit code 1; retry {n} of {on_error} after a ")
    assert outcome.fields["error_retries"] == n
    assert "interruptions" not in outcome.fields
    assert NOW <= outcome.fields["not_before"] <= NOW + cap
    assert outcome.fields["not_before"] == pytest.approx(NOW + cap * draw)
    assert outcome.fields["ended_at"] is None


def test_the_spec_durations_drive_the_backoff():
    # 10s backoff: the first retry waits at most 10 seconds, whatever the draw.
    outcome = decide(running_job(on_error=1, backoff="10s", max_backoff="10m"), code=1, sig=None, now=NOW, draw=0.999)
    assert NOW + 9 < outcome.fields["not_before"] < NOW + 10


@pytest.mark.parametrize("job, code, sig, to, reason", [
    # asked while the attempt was ending (or while the daemon was down), not carried out yet: nothing was
    # signalled, and the attempt's own end decides
    (running_job(request=Request.CANCEL), 0, None, S.SUCCEEDED, "exit code 0"),
    (running_job(request=Request.CANCEL), 1, None, S.FAILED, "exit code 1"),
    (running_job(request=Request.REQUEUE), 0, None, S.SUCCEEDED, "exit code 0"),
    (running_job(request=Request.REQUEUE, on_error=2), 1, None, S.RETRY_WAIT, "exit code 1; retry 1 of 2"),
    # ...but what would run it again (a retry) does not outlive a cancel
    (running_job(request=Request.CANCEL, on_error=2), 1, None, S.CANCELLED,
     "cancelled by user (its attempt had ended: exit code 1"),
    (running_job(request=Request.CANCEL), None, None, S.CANCELLED, "cancelled by user"),   # lost: no end to go by
])
def test_a_request_not_carried_out_yet_gives_way_to_the_attempts_own_end(job, code, sig, to, reason):
    outcome = decide(job, code=code, sig=sig, now=NOW, draw=0.5)
    assert (outcome.to, outcome.fields["request"]) == (to, None)
    assert outcome.reason.startswith(reason)


def test_cancel_wins_over_everything():
    job = running_job(request=Request.CANCEL, kill_reason=TIMEOUT, on_error=3)
    assert decide(job, code=1, sig=None, now=NOW, draw=0.5).to == S.CANCELLED


@pytest.mark.parametrize("to", [S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.CANCELLED])
def test_final_outcomes_record_the_end(to):
    cases = {S.SUCCEEDED: ({}, 0, None), S.FAILED: ({}, 2, None),
             S.TIMED_OUT: ({"kill_reason": TIMEOUT, "wall_time": "1h"}, None, signal.SIGTERM),
             S.CANCELLED: ({"request": Request.CANCEL, "kill_reason": CANCEL}, None, signal.SIGTERM)}
    fields, code, sig = cases[to]
    outcome = decide(running_job(**fields), code=code, sig=sig, now=NOW, draw=0.5)
    assert outcome.to == to
    assert outcome.fields["ended_at"] == NOW


@pytest.mark.parametrize("code, sig, text", [
    (1, None, "exit code 1"),
    (130, None, "exit code 130 (SIGINT)"),
    (255, None, "exit code 255"),
    (None, signal.SIGKILL, "out-of-memory"),
    (None, signal.SIGTERM, "killed by SIGTERM"),
])
def test_describe_exit(code, sig, text):
    assert text in describe_exit(code, sig)


@pytest.mark.parametrize("retry, base, cap, draw, delay", [
    (1, 10, 600, 0.0, 0.0),          # full jitter: a zero draw waits not at all
    (1, 10, 600, 0.5, 5.0),
    (2, 10, 600, 0.5, 10.0),
    (3, 10, 600, 0.5, 20.0),
    (7, 10, 600, 0.5, 300.0),        # 10 * 2**6 = 640, capped at 600
    (30, 10, 600, 0.5, 300.0),
    (0, 10, 600, 1.0, 10.0),         # retry numbers below 1 count as the first
])
def test_backoff_delay(retry, base, cap, draw, delay):
    assert backoff_delay(retry, base, cap, draw) == pytest.approx(delay)


@pytest.mark.parametrize("retry", range(1, 12))
def test_backoff_delay_is_bounded_by_the_cap(retry):
    ceiling = min(600, 10 * 2 ** (retry - 1))
    assert backoff_delay(retry, 10, 600, 0.0) == 0.0
    assert ceiling * 0.99 <= backoff_delay(retry, 10, 600, 0.9999) <= ceiling <= 600


# -- exit kinds: what the compute backend says ended the attempt ---------------------------

GIB = 1024 ** 3
RECLAIM = "Host EC2 (instance i-0abc) terminated."
PULL = "CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref"
STEP = "srun step 0 (python train.py) failed with exit code 3"
OOM_REASON = "OutOfMemoryError: Container killed due to memory usage"


def ended_job(*, limits=None, on_error=0, error_retries=0, interruptions=0, reclaims=0, **fields):
    """A running job with any limits (running_job() sets only wall time and on_timeout)."""
    spec = {"retries": {"on_error": on_error, "backoff": "10s", "max_backoff": "10m"}, "limits": limits or {}}
    fields.setdefault("started_at", NOW - 600)
    return job_record(spec=spec, state=S.RUNNING, error_retries=error_retries, interruptions=interruptions,
                      reclaims=reclaims, pid=None, assigned=(0,), attempts=1 + error_retries + interruptions,
                      **fields)


LOST = "Batch no longer knows Batch job 5f0c; its run time is unknown and not charged"
OOM_14 = "ran out of memory: the container used more than its 14 GiB; ask for more with resources.memory"


@pytest.mark.parametrize("job, kind, code, detail, memory, to, reason", [
    # reclaimed and capacity: never errors, whatever the retries left
    (ended_job(), ExitKind.RECLAIMED, None, RECLAIM, None, S.RETRY_WAIT,
     f"its instance was reclaimed ({RECLAIM}); not counted as an error, resumes from its last checkpoint in 5s"),
    (ended_job(on_error=1, error_retries=1), ExitKind.RECLAIMED, 143, RECLAIM, None, S.RETRY_WAIT,
     "its instance was reclaimed"),
    (ended_job(), ExitKind.CAPACITY, None, PULL, None, S.RETRY_WAIT,
     f"the infrastructure failed before it ran ({PULL}); not counted as an error"),
    # an attempt the backend lost track of: lost infrastructure, not an error, even with no retries left
    (ended_job(), ExitKind.LOST, None, LOST, None, S.RETRY_WAIT,
     f"the compute backend lost track of it ({LOST}); not counted as an error, resumes from its last checkpoint"),
    (ended_job(on_error=1, error_retries=1), ExitKind.LOST, None, LOST, None, S.RETRY_WAIT, "lost track of it"),
    # out of memory: an error of the job, said in plain words
    (ended_job(), ExitKind.OOM, 137, OOM_REASON, 14 * GIB, S.FAILED, OOM_14),
    (ended_job(memory=8 * GIB), ExitKind.OOM, 137, OOM_REASON, None, S.FAILED,
     "ran out of memory: the container used more than its 8 GiB; ask for more with resources.memory"),
    (ended_job(memory=8 * GIB), ExitKind.OOM, 137, OOM_REASON, 3 * GIB // 2, S.FAILED, "more than its 1.5 GiB"),
    (ended_job(), ExitKind.OOM, None, OOM_REASON, None, S.FAILED,
     "ran out of memory: the container used more than the memory it was given; ask for more with resources.memory"),
    (ended_job(on_error=2), ExitKind.OOM, 137, OOM_REASON, 14 * GIB, S.RETRY_WAIT,
     "ran out of memory: the container used more than its 14 GiB; retry 1 of 2 after a 5s backoff; ask for more"),
    (ended_job(on_error=1, error_retries=1), ExitKind.OOM, 137, OOM_REASON, 14 * GIB, S.FAILED,
     "more than its 14 GiB after 1 retries; ask for more with resources.memory"),
    # the backend's timeout: the wall-time rule, or the GPU-hour budget when that was the binding limit
    (ended_job(limits={"wall_time": "1h"}), ExitKind.TIMEOUT, None, "Job attempt duration exceeded timeout",
     None, S.TIMED_OUT, "exceeded its wall time of 1h00m"),
    (ended_job(limits={"wall_time": "1h", "on_timeout": "requeue"}), ExitKind.TIMEOUT, 143, "", None,
     S.RETRY_WAIT, "reached its wall time of 1h00m; requeued to resume from its last checkpoint"),
    (ended_job(limits={"wall_time": "10h", "max_gpu_hours": 1}), ExitKind.TIMEOUT, None, "", None, S.TIMED_OUT,
     "used its budget of 1 GPU-hours"),
    (ended_job(), ExitKind.TIMEOUT, None, "", None, S.TIMED_OUT, "exceeded the time limit its compute backend set"),
    # APP: the exit code decides, as before; without a code the backend's words are the reason
    (ended_job(), ExitKind.APP, 3, "Essential container in task exited", None, S.FAILED, "exit code 3"),
    (ended_job(), ExitKind.APP, 0, "", None, S.SUCCEEDED, "exit code 0"),
    (ended_job(), ExitKind.APP, None, "CannotStartContainerError: executable file not found", None, S.FAILED,
     "ended without an exit code (CannotStartContainerError: executable file not found)"),
    # STEP: the script ended 0 after an srun step failed: the step's code and words decide
    (ended_job(), ExitKind.STEP, 3, STEP, None, S.FAILED, STEP),
    (ended_job(on_error=1), ExitKind.STEP, 3, STEP, None, S.RETRY_WAIT, f"{STEP}; retry 1 of 1 after a"),
    # what gqa asked for wins over how the backend carried it out
    (ended_job(request=Request.CANCEL), ExitKind.RECLAIMED, None, RECLAIM, None, S.CANCELLED, "cancelled by user"),
    (ended_job(kill_reason=REQUEUE), ExitKind.CAPACITY, None, PULL, None, S.RETRY_WAIT, "requeued by user"),
    (ended_job(request=Request.CANCEL), ExitKind.LOST, None, LOST, None, S.CANCELLED, "cancelled by user"),
    (ended_job(kill_reason=TIMEOUT, limits={"wall_time": "1h"}), ExitKind.OOM, 137, OOM_REASON, None, S.TIMED_OUT,
     "exceeded its wall time of 1h00m"),
], ids=["reclaimed", "reclaimed-no-retries-left", "capacity", "lost", "lost-no-retries-left", "oom", "oom-spec-memory",
        "oom-fraction",
        "oom-unknown-memory", "oom-retried", "oom-after-retries", "timeout-stop", "timeout-requeue",
        "timeout-gpu-hours", "timeout-backend-limit", "app-error", "app-success", "app-no-code", "step-failed",
        "step-failed-retried",
        "cancel-wins", "requeue-wins", "cancel-wins-over-lost", "our-timeout-wins"])
def test_decide_by_exit_kind(job, kind, code, detail, memory, to, reason):
    outcome = decide(job, code=code, sig=None, now=NOW, draw=0.5, kind=kind, detail=detail, memory=memory)
    assert outcome.to == to
    assert reason in outcome.reason
    assert (outcome.fields["exit_code"], outcome.fields["pid"], outcome.fields["assigned"]) == (code, None, ())
    assert outcome.fields["ended_at"] == (None if to == S.RETRY_WAIT else NOW)


@pytest.mark.parametrize("kind, reclaimed", [(ExitKind.RECLAIMED, 1), (ExitKind.CAPACITY, 0), (ExitKind.LOST, 0)])
@pytest.mark.parametrize("interruptions, reclaims, error_retries, draw", [
    (0, 0, 0, 0.5),
    (1, 1, 0, 0.999),
    (4, 2, 1, 0.25),
    (12, 5, 0, 0.999),      # 10s * 2**12 is far over the 10m cap
])
def test_infrastructure_failures_back_off_and_are_not_errors(kind, reclaimed, interruptions, reclaims,
                                                             error_retries, draw):
    job = ended_job(on_error=error_retries, error_retries=error_retries, interruptions=interruptions,
                    reclaims=reclaims)
    outcome = decide(job, code=None, sig=None, now=NOW, draw=draw, kind=kind, detail="why")
    n = interruptions + 1
    ceiling = min(600, 10 * 2 ** (n - 1))
    assert outcome.to == S.RETRY_WAIT
    assert outcome.fields["interruptions"] == n
    assert outcome.fields.get("reclaims", job.reclaims) == reclaims + reclaimed
    assert "error_retries" not in outcome.fields                 # retries.on_error is not spent
    assert outcome.fields["not_before"] == pytest.approx(NOW + ceiling * draw)   # full jitter under the cap
    assert outcome.fields["ended_at"] is None


def test_an_oom_with_retries_left_counts_as_an_error():
    outcome = decide(ended_job(on_error=2, error_retries=1), code=137, sig=None, now=NOW, draw=0.5,
                     kind=ExitKind.OOM, detail=OOM_REASON, memory=14 * GIB)
    assert (outcome.to, outcome.fields["error_retries"]) == (S.RETRY_WAIT, 2)
    assert "interruptions" not in outcome.fields and "reclaims" not in outcome.fields
    assert outcome.fields["not_before"] == pytest.approx(NOW + 10.0)    # 2nd retry: 20s ceiling x 0.5


def test_decide_without_a_kind_is_the_local_rules():
    """Local exits carry no kind: every rule above leaves them as they were."""
    job = ended_job()
    assert decide(job, code=1, sig=None, now=NOW, draw=0.5) == \
        decide(job, code=1, sig=None, now=NOW, draw=0.5, kind=ExitKind.APP, detail="")
    lost = decide(job, code=None, sig=None, now=NOW, draw=0.5)
    assert (lost.to, lost.fields["interruptions"]) == (S.RETRY_WAIT, 1)


# started 100 s ago with a wall time of 1m: gqa stops it no sooner than NOW - 40
LIMITED = {"started_at": NOW - 100, "wall_time": "1m"}
FINISHED_WHILE_ASKED = "exit code 0 (it finished while being asked to stop)"


@pytest.mark.parametrize("job, code, ended_at, to, reason", [
    # ended within its wall time, seen late (a busy or paused daemon stopped it afterwards): its own end
    (running_job(kill_reason=TIMEOUT, **LIMITED), 0, NOW - 50, S.SUCCEEDED, "exit code 0"),
    (running_job(kill_reason=TIMEOUT, on_timeout="requeue", **LIMITED), 0, NOW - 50, S.SUCCEEDED, "exit code 0"),
    (running_job(kill_reason=TIMEOUT, on_timeout="requeue", **LIMITED), 0, NOW - 40, S.SUCCEEDED, "exit code 0"),
    (running_job(kill_reason=TIMEOUT, on_timeout="requeue", on_error=1, **LIMITED), 2, NOW - 50, S.RETRY_WAIT,
     "exit code 2; retry 1 of 1"),
    (running_job(kill_reason=TIMEOUT, **LIMITED), 2, NOW - 50, S.FAILED, "exit code 2"),
    (ended_job(kill_reason=GPU_HOURS, limits={"max_gpu_hours": 0.01}, started_at=NOW - 100), 0, NOW - 70,
     S.SUCCEEDED, "exit code 0"),     # its budget: 36 GPU-seconds on its 1 GPU, spent at NOW - 64
    (ended_job(kill_reason=GPU_HOURS, limits={"max_gpu_hours": 0.01}, started_at=NOW - 100), 0, NOW - 60,
     S.TIMED_OUT, "used its budget of 0.01 GPU-hours"),
    # ended after the deadline, when the stop may have reached it: the limit decides; an end stamped a
    # few ms before it is the stop's too (an exit file's time lags by up to a kernel tick)
    (running_job(kill_reason=TIMEOUT, **LIMITED), 143, NOW - 40.005, S.TIMED_OUT, "exceeded its wall time of 1m00s"),
    (ended_job(kill_reason=GPU_HOURS, limits={"max_gpu_hours": 0.01}, started_at=NOW - 100), 143, NOW - 64.005,
     S.TIMED_OUT, "used its budget of 0.01 GPU-hours"),
    (running_job(kill_reason=TIMEOUT, **LIMITED), 0, NOW - 30, S.TIMED_OUT, "exceeded its wall time of 1m00s"),
    (running_job(kill_reason=TIMEOUT, **LIMITED), 143, NOW - 30, S.TIMED_OUT, "exceeded its wall time of 1m00s"),
    (running_job(kill_reason=TIMEOUT, **LIMITED), 0, None, S.TIMED_OUT, "exceeded its wall time of 1m00s"),
    (running_job(kill_reason=TIMEOUT, on_timeout="requeue", **LIMITED), 143, NOW - 30, S.RETRY_WAIT,
     "reached its wall time of 1m00s; requeued"),
    # asked to make way at its wall time (on_timeout: requeue), it finished: never run again
    (running_job(kill_reason=TIMEOUT, on_timeout="requeue", **LIMITED), 0, NOW - 30, S.SUCCEEDED,
     FINISHED_WHILE_ASKED),
    (running_job(kill_reason=TIMEOUT, on_timeout="requeue", **LIMITED), 0, None, S.SUCCEEDED, FINISHED_WHILE_ASKED),
])
def test_an_attempt_that_ended_before_its_deadline_keeps_its_own_end(job, code, ended_at, to, reason):
    outcome = decide(job, code=code, sig=None, now=NOW, draw=0.5, ended_at=ended_at)
    assert (outcome.to, outcome.fields["kill_reason"], outcome.fields["request"]) == (to, None, None)
    assert outcome.reason.startswith(reason)
