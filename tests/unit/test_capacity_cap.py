"""The cap on capacity failures in a row (retries.on_capacity): a job the
infrastructure cannot run retries, then falls back from spot to on demand,
then ends FAILED with the numbers; any other end breaks the run."""

from dataclasses import replace

import pytest

from gqa.models.job import JobState, Transition
from gqa.models.outcome import ExitKind, decide
from gqa.services.settle import on_spot
from gqa.ports import Inventory
from gqa.scheduling import Gpu
from tests.builders import job_record

S = JobState
NOW = 100_000.0
PULL = "CannotPullContainerError: pull access denied"
RECLAIM = "Host EC2 (instance i-0abc) terminated."


def failing_job(*, failures: int, on_capacity: int | None = None, spot: bool = False, gpus: int = 1,
                gpu_type: str | None = "a10g", launched_every: float = 1300.0):
    """A job whose last `failures` attempts met capacity failures, launched every `launched_every` seconds."""
    retries = {} if on_capacity is None else {"on_capacity": on_capacity}
    attempts = failures + 1
    starts = tuple(Transition(S.STARTING, NOW - launched_every * (attempts - i), "assigned GPUs 0")
                   for i in range(attempts))
    return job_record(spec={"retries": retries, "spot": spot, "resources": {"gpus": gpus, "gpu_type": gpu_type}},
                      state=S.RUNNING, capacity_failures=failures, interruptions=failures, attempts=attempts,
                      assigned=(0,), history=starts)


@pytest.mark.parametrize("job, spot, to, reason, fields", [
    # under the cap (default 5 retries): back off, counting the run
    (failing_job(failures=0), False, S.RETRY_WAIT, "the infrastructure failed before it ran",
     {"capacity_failures": 1}),
    (failing_job(failures=4), False, S.RETRY_WAIT, "not counted as an error", {"capacity_failures": 5}),
    # the 6th failure in a row: FAILED, in plain words with the numbers
    (failing_job(failures=5), False, S.FAILED,
     f"no capacity for 1 x a10g after 6 attempts over 2h10m (last: {PULL})", {"capacity_failures": 6}),
    (failing_job(failures=2, on_capacity=2, gpus=4, gpu_type="a10g,l4", launched_every=600), False, S.FAILED,
     f"no capacity for 4 x a10g or l4 after 3 attempts over 30m00s (last: {PULL})", {"capacity_failures": 3}),
    (failing_job(failures=0, on_capacity=0, gpu_type=None), False, S.FAILED,
     "no capacity for 1 x any GPU after 1 attempts over 21m40s", {}),
    # on spot, a spot-tolerant job falls back to on demand first, and its run starts afresh
    (failing_job(failures=5, spot=True), True, S.RETRY_WAIT,
     "no capacity for 1 x a10g spot after 6 attempts over 2h10m (last: " + PULL + "); falls back to on demand in",
     {"spot": False, "capacity_failures": 0}),
    # ...and on demand it ends FAILED at the cap
    (failing_job(failures=5, spot=True), False, S.FAILED, "no capacity for 1 x a10g after 6 attempts", {}),
    # the cap counts only failures in a row: a job that once ran starts from 0 (see below)
], ids=["first", "last-under-cap", "cap", "cap-of-2-several-types", "no-retries-any-type", "spot-falls-back",
        "on-demand-after-fallback"])
def test_capacity_failures_in_a_row(job, spot, to, reason, fields):
    outcome = decide(job, code=None, sig=None, now=NOW, draw=0.5, kind=ExitKind.CAPACITY, detail=PULL, spot=spot)
    assert outcome.to == to
    assert reason in outcome.reason
    for name, value in fields.items():
        assert outcome.fields[name] == value, name
    assert "error_retries" not in outcome.fields          # never an error, capped or not


def test_without_history_the_reason_leaves_the_duration_out():
    job = replace(failing_job(failures=5), history=())
    outcome = decide(job, code=None, sig=None, now=NOW, draw=0.5,
                     kind=ExitKind.CAPACITY, detail="")
    assert outcome.reason == "no capacity for 1 x a10g after 6 attempts"


@pytest.mark.parametrize("kind, code, detail", [
    (ExitKind.APP, 0, ""),
    (ExitKind.APP, 1, "Essential container in task exited"),
    (ExitKind.RECLAIMED, None, RECLAIM),
    (ExitKind.TIMEOUT, None, "Job attempt duration exceeded timeout"),
])
def test_any_other_end_breaks_the_run(kind, code, detail):
    outcome = decide(failing_job(failures=5), code=code, sig=None, now=NOW, draw=0.5, kind=kind, detail=detail)
    assert outcome.fields["capacity_failures"] == 0


def test_a_fallback_backs_off_like_any_infrastructure_failure():
    job = failing_job(failures=5, spot=True)
    outcome = decide(job, code=None, sig=None, now=NOW, draw=0.5, kind=ExitKind.CAPACITY, detail=PULL, spot=True)
    # 6th interruption: 10s * 2**5 = 320s ceiling, half of it with draw 0.5
    assert outcome.fields["not_before"] == pytest.approx(NOW + 160.0)
    assert outcome.fields["interruptions"] == 6
    assert outcome.reason.endswith("falls back to on demand in 2m40s")


@pytest.mark.parametrize("assigned, expected", [((0,), True), ((2, 3), False), ((), False)])
def test_on_spot_reads_the_pool_of_the_assigned_gpus(assigned, expected):
    inventory = Inventory((Gpu(0, "a10g", spot=True), Gpu(1, "a10g", spot=True), Gpu(2, "a10g"), Gpu(3, "a10g")))
    assert on_spot(job_record(assigned=assigned), inventory) is expected
    assert on_spot(job_record(assigned=assigned), None) is False
