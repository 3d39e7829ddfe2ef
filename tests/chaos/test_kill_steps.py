"""kill -9 at every step of a launch and of a settlement (daemon/faults.py):
16 short jobs on 4 GPUs, the daemon SIGKILLs itself the first time it
passes the step, the next daemon dies the third time it passes it (mid
stream, with jobs of the first life still running or ending), and a third
daemon without a fault finishes the queue. Every job runs exactly once:
a launch is recorded before its process may run, and kill -9 does not
kill jobs, so there is never a reason to start one again."""

import pytest

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]

STEPS = ["claimed", "spawned", "recorded", "released", "exits-read", "exits-recorded"]
JOBS, SECONDS = 16, 0.2


@pytest.mark.parametrize("step", STEPS)
def test_a_daemon_killed_at_a_step_loses_and_doubles_nothing(chaos, step):
    first = chaos.start(fault=f"{step}:1")
    ids = chaos.submit(JOBS, SECONDS)
    chaos.died_of_fault(first)

    second = chaos.start(fault=f"{step}:3")
    chaos.died_of_fault(second)

    chaos.start()
    chaos.check(f"kill -9 at {step}:1 then {step}:3", ids, once=True)
    assert chaos.kills == 2
