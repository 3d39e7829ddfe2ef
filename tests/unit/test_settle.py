"""settle(): an ended attempt is charged GPU time and money from when it began
to hold its GPUs until it ended, and nothing if it never began."""

import pytest

from gqa.models.job import JobState
from gqa.models.outcome import ExitKind
from gqa.ports import Exit, Inventory
from gqa.scheduling import Gpu
from gqa.services.settle import settle
from tests.builders import NOW, job_record

HOUR = 3600.0
INVENTORY = Inventory(gpus=(Gpu(0, "a10g", 2.0), Gpu(1, "a10g", 2.0), Gpu(2, "a10g", 2.0, spot=True)))
RECLAIM = "Host EC2 (instance i-0abc) terminated."


def running(assigned=(0, 1), started_at=NOW - 2 * HOUR, gpu_seconds=0.0):
    return job_record(spec={"resources": {"gpus": len(assigned)}}, state=JobState.RUNNING, attempts=1,
                      assigned=assigned, started_at=started_at, gpu_seconds=gpu_seconds)


@pytest.mark.parametrize("job, ended, started, usage, cost", [
    # launch is start (a local process): from the recorded start
    (running(), Exit("1", 1, 0, None), NOW - 2 * HOUR, 2 * 2 * HOUR, 8.0),
    # Batch's container started an hour after the launch was recorded: from Batch's start
    (running(), Exit("1", 1, 0, None), NOW - HOUR, 2 * HOUR, 4.0),
    # it never started (image pull, reclaimed while waiting): nothing
    (running(), Exit("1", 1, None, None, ExitKind.CAPACITY, "CannotPullContainerError"), None, 0.0, 0.0),
    (running(assigned=(2,)), Exit("1", 1, None, None, ExitKind.RECLAIMED, RECLAIM), None, 0.0, 0.0),
    # reclaimed 30 minutes into its run, on one spot GPU
    (running(assigned=(2,)), Exit("1", 1, None, None, ExitKind.RECLAIMED, RECLAIM), NOW - HOUR / 2, HOUR / 2, 1.0),
    # a start after the end (clocks apart) is no negative charge
    (running(), Exit("1", 1, 0, None), NOW + 5, 0.0, 0.0),
    # on GPUs the inventory no longer lists (a daemon restarted with fewer): charged, never $0
    (running(assigned=(4, 5)), Exit("1", 1, 0, None), NOW - HOUR, 2 * HOUR, 4.0),
], ids=["local", "batch-started-late", "never-pulled", "reclaimed-waiting", "reclaimed-running", "clock-skew",
        "gpus-no-longer-listed"])
def test_an_attempt_is_charged_from_its_start_to_its_end(job, ended, started, usage, cost):
    change = settle(job, ended, at=NOW, started=started, draw=0.5, inventory=INVENTORY)
    assert change.usage == pytest.approx(usage)
    assert change.cost == pytest.approx(cost)
    assert change.fields["gpu_seconds"] == pytest.approx(usage)


@pytest.mark.parametrize("started, kept", [(NOW - HOUR, NOW - HOUR), (None, None)])
def test_the_record_keeps_the_start_it_was_charged_from(started, kept):
    change = settle(running(), Exit("1", 1, 0, None), at=NOW, started=started, draw=0.5, inventory=INVENTORY)
    assert change.fields.get("started_at") == kept     # None: the launch's own start stays on the record


def test_usage_adds_to_what_earlier_attempts_used():
    change = settle(running(gpu_seconds=500.0), Exit("1", 1, 0, None), at=NOW, started=NOW - 100, draw=0.5,
                    inventory=INVENTORY)
    assert change.fields["gpu_seconds"] == pytest.approx(500.0 + 2 * 100)


def test_the_job_keeps_what_all_its_attempts_cost():
    earlier = job_record(spec={"resources": {"gpus": 2}}, state=JobState.RUNNING, attempts=2, assigned=(0, 1),
                         started_at=NOW - HOUR, cost=3.5)
    change = settle(earlier, Exit("1", 1, 0, None), at=NOW, started=NOW - HOUR, draw=0.5, inventory=INVENTORY)
    assert change.cost == pytest.approx(4.0)                  # this attempt: the team's spend
    assert change.fields["cost"] == pytest.approx(3.5 + 4.0)  # the job's own, over its attempts
