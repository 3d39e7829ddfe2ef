"""A job that ends by itself, exit 0, after gqa asked it to stop (within the
grace period) has finished: it must not run again. Today the stop's reason
wins over the exit code (gqa/models/outcome.py, _stopped_by_us), so such a
job goes back to the queue and runs a second time; under a burst the same
race re-runs jobs that merely happened to end as `gqa local stop` came."""

import time

import pytest

from .harness import Runs

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]


def test_a_job_that_finishes_within_the_grace_period_of_a_stop_runs_once(make_chaos):
    chaos = make_chaos(gpus=1, grace=5.0)
    chaos.start()
    [job] = chaos.submit(1, mode="finish")
    deadline = time.monotonic() + 15
    while job not in Runs.read(chaos.runs).starts:
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    stopped = chaos.cli("local", "stop", "--timeout", "20")
    assert stopped.returncode == 0, stopped.stderr
    chaos.start()
    chaos.check("exit 0 within a stop's grace", [job], once=True)
