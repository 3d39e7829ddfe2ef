"""A hand-checked replay: 8 jobs on 4 GPUs, one team, start times worked out
on paper from the scheduling rules (README.md, "How it works"): gang, FIFO
blocking, EASY backfill on wall times, gqa's preference for short expected
run times.

    job  submit  GPUs  runs  wall
    A    0       2     100   100
    B    1       4     50    50     needs the whole cluster: waits for A (ends by 100)
    C    2       1     50    60
    D    3       2     200   200
    E    5       1     30    40
    F    6       2     300   1000
    G    7       2     80    100
    H    8       1     20    30

fifo: B blocks everything behind it until A ends at 100; B runs 100-150;
  C, D, E start at 150 (4 GPUs); F (2) waits behind nothing at 180 (1 free
  after E) but blocks H, starts at 200 when C ends; G at 350 when D ends;
  H at 430 when G ends.
multifactor (EASY): B is reserved for 100 on all four GPUs. C (wall ends 62),
  E (45) and, when E ends at 35, H (65) finish before 100: backfilled. D, F
  and G would run past 100 and wait. At 150: D, F start (age order), G gets
  the reservation at 350 (when D's wall time ends) and starts then.
gqa: the same until 150, where the order by expected run time is G (wall
  100), D (200), F (1000): G and D start, F starts at 230 when G ends."""

from pathlib import Path

import pytest

from gqa.scheduling.presets import preset
from gqa.sim import cluster, derive, load_trace, simulate

GOLDEN = Path(__file__).with_name("golden.csv")

EXPECTED = {
    "fifo": {"A": 0, "B": 100, "C": 150, "D": 150, "E": 150, "F": 200, "G": 350, "H": 430},
    "multifactor": {"A": 0, "B": 100, "C": 2, "D": 150, "E": 5, "F": 150, "G": 350, "H": 35},
    "gqa": {"A": 0, "B": 100, "C": 2, "D": 150, "E": 5, "F": 230, "G": 150, "H": 35},
}


def replay(policy: str):
    trace = load_trace(GOLDEN)
    work = derive(trace.jobs, cluster_gpus=4)
    return simulate(work, cluster(4), preset(policy), name=policy)


@pytest.mark.parametrize("policy", EXPECTED)
def test_start_times(policy):
    result = replay(policy)
    assert {o.id: o.start for o in result.outcomes} == EXPECTED[policy]


@pytest.mark.parametrize("policy", EXPECTED)
def test_end_is_start_plus_true_duration(policy):
    runs = {"A": 100, "B": 50, "C": 50, "D": 200, "E": 30, "F": 300, "G": 80, "H": 20}
    result = replay(policy)
    assert {o.id: o.end - o.start for o in result.outcomes} == runs
    assert all(o.attempts == 1 and not o.timed_out for o in result.outcomes)


def test_fifo_never_starts_a_job_ahead_of_an_earlier_one():
    starts = [o.start for o in replay("fifo").outcomes]
    assert starts == sorted(starts)
