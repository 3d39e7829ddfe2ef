"""The scheduling rules Slurm scripts rely on, one table each: CPU-only jobs
(0 GPUs), --exclusive, --nice and --time-min."""

from dataclasses import replace

import pytest

from gqa.scheduling import Policy, TeamPolicy, plan
from gqa.scheduling.budget import gpu_hours_cap
from gqa.scheduling.limits import hard_limit_problems
from gqa.scheduling.presets import preset
from gqa.scheduling.ranking import NICE_SCALE
from tests.builders import pending, running, snapshot

NOW = snapshot().now
NO_BACKFILL = Policy(backfill=False)


def starts(result) -> dict[str, tuple[int, ...]]:
    return {s.job_id: s.gpus for s in result.starts}


# -- CPU-only jobs -------------------------------------------------------------------

@pytest.mark.parametrize("snap, started, waiting", [
    pytest.param(snapshot(2, cpus=8, running=[running("r", gpus=[0, 1], cpus=2)],
                          pending=[pending("cpu", gpus=0, cpus=4)]),
                 {"cpu": ()}, {}, id="starts with every GPU taken"),
    pytest.param(snapshot(2, cpus=8, running=[running("r", gpus=[0, 1], cpus=6)],
                          pending=[pending("cpu", gpus=0, cpus=8)]),
                 {}, {"cpu": "needs 8 CPUs, 2 free"}, id="waits for its CPUs, with the numbers"),
    pytest.param(snapshot(2, cpus=4, pending=[pending(f"c{i}", gpus=0, seq=i) for i in range(6)]),
                 {"c0": (), "c1": (), "c2": (), "c3": ()}, {"c4": "needs 1 CPUs, 0 free", "c5": "needs 1 CPUs, 0 free"},
                 id="one CPU each when it names none: never more than the machine has"),
    pytest.param(snapshot(2, memory=10, pending=[pending("cpu", gpus=0, memory=12)]),
                 {}, {"cpu": "needs 12B memory, 10B free"}, id="waits for its memory"),
    pytest.param(snapshot(2, cpus=8, pending=[pending("gpu", gpus=1, cpus=2, seq=0),
                                              pending("cpu", gpus=0, cpus=2, seq=1)]),
                 {"gpu": (0,), "cpu": ()}, {}, id="beside a GPU job, sharing the CPUs"),
    pytest.param(snapshot(2, cpus=8, teams={"default": TeamPolicy(max_gpus=1, max_gpus_per_user=1)},
                          running=[running("r", gpus=[0, 1])], pending=[pending("cpu", gpus=0)]),
                 {"cpu": ()}, {}, id="uses none of a team already over its GPU quota"),
    pytest.param(snapshot(2, cpus=8, policy=NO_BACKFILL,
                          running=[running("r", gpus=[0], wall_time=100)],
                          pending=[pending("big", gpus=2, seq=0), pending("cpu", gpus=0, seq=1)]),
                 {"cpu": ()}, {"big": "needs 2 GPUs, 1 free"}, id="not held back by a job first in line for GPUs"),
    pytest.param(snapshot(1, cpus=8, pending=[pending(f"c{i}", gpus=0, seq=i, group="a", group_limit=2)
                                              for i in range(3)]),
                 {"c0": (), "c1": ()}, {"c2": "array a at 2 of 2 tasks running at once"},
                 id="array limits still apply"),
])
def test_cpu_only_jobs(snap, started, waiting):
    result = plan(snap)
    assert starts(result) == started
    assert {k: v for k, v in result.waiting.items()} == waiting


@pytest.mark.parametrize("explain", [True, False])
def test_a_dispatcher_pass_with_no_gpu_free_still_starts_cpu_only_jobs(explain):
    # explain=False stops early once nothing can start: a CPU-only job ranked after GPU jobs still can
    snap = snapshot(1, cpus=4, running=[running("r", gpus=[0])],
                    pending=[*(pending(f"g{i}", gpus=1, seq=i) for i in range(5)), pending("cpu", gpus=0, seq=9)])
    assert starts(plan(snap, explain=explain)) == {"cpu": ()}
    no_backfill = replace(snap, policy=NO_BACKFILL, pending=(pending("all", gpus=2, seq=0), *snap.pending))
    assert starts(plan(no_backfill, explain=explain)) == {"cpu": ()}


def test_cpu_only_jobs_cost_nothing_in_gpu_terms():
    assert gpu_hours_cap(0, None, None) == 0.0   # no wall time: still no GPU-hours, so no unbounded cost
    snap = snapshot(1, cpus=4, teams={"default": TeamPolicy(budget=1.0)}, spend={"default": 0.5},
                    pending=[pending("cpu", gpus=0)])
    assert starts(plan(snap)) == {"cpu": ()}
    result = plan(snapshot(4, usage={}, cpus=8, running=[running("c", team="a", gpus=[])],
                           pending=[pending("x", team="a"), pending("y", team="b", seq=1)]))
    assert result.factors["x"].fair_share == result.factors["y"].fair_share   # holding CPUs is not GPU usage


def test_a_cpu_only_job_is_never_refused_for_gpus():
    def problems(gpus):
        return hard_limit_problems(gpus=gpus, gpu_type="h100", wall_time=None, cpus=None, memory=None,
                                   inventory=snapshot(2).gpus, policy=Policy(max_gpus_per_job=1))
    assert problems(0) == []
    assert problems(2) == ["asks for h100 GPUs; the queue has 2 gpu", "asks for 2 GPUs; the limit per job is 1"]


# -- --exclusive ---------------------------------------------------------------------

@pytest.mark.parametrize("snap, started, waiting", [
    pytest.param(snapshot(4, cpus=8, pending=[pending("ex", gpus=1, exclusive=True)]),
                 {"ex": (0,)}, {}, id="starts on an empty machine"),
    pytest.param(snapshot(4, cpus=8, running=[running("a", gpus=[0]), running("b", gpus=[1]), running("c", gpus=[])],
                          pending=[pending("ex", gpus=1, exclusive=True)]),
                 {}, {"ex": "waits for the machine to be empty (--exclusive): 3 jobs running"},
                 id="waits while anything runs, CPU-only jobs included"),
    pytest.param(snapshot(4, pending=[pending("first", gpus=1, seq=0), pending("ex", gpus=1, exclusive=True, seq=1)]),
                 {"first": (0,)}, {"ex": "waits for the machine to be empty (--exclusive): 1 job running"},
                 id="nor beside a job started earlier in the same pass"),
    pytest.param(snapshot(4, cpus=8, pending=[pending("ex", gpus=1, exclusive=True, seq=0),
                                              pending("gpu", gpus=1, seq=1), pending("cpu", gpus=0, seq=2)]),
                 {"ex": (0,)}, {"gpu": "job ex has the machine to itself (--exclusive)",
                                "cpu": "job ex has the machine to itself (--exclusive)"},
                 id="once started, nothing starts beside it"),
    pytest.param(snapshot(4, cpus=8, running=[running("ex", gpus=[0], exclusive=True)],
                          pending=[pending("gpu", gpus=1), pending("cpu", gpus=0, seq=1)]),
                 {}, {"gpu": "job ex has the machine to itself (--exclusive)",
                      "cpu": "job ex has the machine to itself (--exclusive)"},
                 id="while it runs, nothing starts"),
])
def test_exclusive(snap, started, waiting):
    result = plan(snap)
    assert starts(result) == started
    assert result.waiting == waiting


def test_a_blocked_exclusive_job_reserves_the_machine_from_when_everything_has_ended():
    # r (GPU) ends at +100, c (CPU-only) at +300: the machine is empty at +300
    snap = snapshot(4, cpus=8, running=[running("r", gpus=[0], wall_time=100, started_at=NOW),
                                        running("c", gpus=[], wall_time=300, started_at=NOW)],
                    pending=[pending("ex", gpus=1, exclusive=True, wall_time=50, seq=0),
                             pending("fits", gpus=1, wall_time=200, seq=1, submitted_at=1),
                             pending("cpu-long", gpus=0, wall_time=400, seq=2, submitted_at=2),
                             pending("cpu-short", gpus=0, wall_time=250, seq=3, submitted_at=3)])
    result = plan(snap)
    assert result.reserved == {"ex": NOW + 300}
    assert set(starts(result)) == {"fits", "cpu-short"}      # both end before +300
    assert result.waiting["cpu-long"] == ("waiting behind job ex, reserved to start in 5m00s; its wall time "
                                          "of 6m40s would run past that")


def test_without_backfill_an_exclusive_job_first_in_line_holds_everything_back():
    snap = snapshot(4, cpus=8, policy=NO_BACKFILL, running=[running("r", gpus=[0], wall_time=100)],
                    pending=[pending("ex", gpus=1, exclusive=True, seq=0), pending("gpu", gpus=1, seq=1),
                             pending("cpu", gpus=0, seq=2)])
    for explain in (True, False):
        result = plan(snap, explain=explain)
        assert starts(result) == {}
    result = plan(snap)
    assert result.waiting["cpu"] == "waiting behind job ex, which is first in line for the whole machine (--exclusive)"


def test_an_exclusive_job_does_not_preempt():
    policy = replace(preset("gqa"), preempt_tiers=(2,))
    snap = snapshot(2, policy=policy, running=[running("low", gpus=[0], tier=2)],
                    pending=[pending("ex", gpus=1, tier="high", exclusive=True)])
    result = plan(snap)
    assert result.preempt == [] and "ex" in result.waiting


# -- --nice --------------------------------------------------------------------------

@pytest.mark.parametrize("nice_a, nice_b, first", [
    (0, 0, "a"),              # a is older
    (100, 0, "b"),            # nice 100 takes 0.01 off a's score: more than its age lead
    (0, -100, "b"),           # a negative nice raises b
    (-10_000, 0, "a"),
])
def test_nice_moves_a_job_within_its_tier(nice_a, nice_b, first):
    # a's age lead: 1 x 0.05 day / 7 days = 0.0071 of the score, less than nice 100's 0.01;
    # two teams with equal shares, so a's start does not change b's fair share
    day = 86400.0
    snap = snapshot(1, now=day, pending=[pending("a", team="x", submitted_at=0.0, nice=nice_a),
                                         pending("b", team="y", submitted_at=0.05 * day, seq=1, nice=nice_b)])
    result = plan(snap)
    assert result.order[0] == first
    assert result.factors["a"].nice == pytest.approx(-nice_a / NICE_SCALE)
    assert result.factors["a"].score - result.factors["b"].score == pytest.approx(
        1.0 * 0.05 / 7 + (nice_b - nice_a) / NICE_SCALE)


def test_nice_never_moves_a_job_out_of_its_tier():
    snap = snapshot(1, pending=[pending("low", tier="low", nice=-10_000), pending("normal", seq=1, nice=10_000)])
    assert plan(snap).order == ["normal", "low"]


# -- --time-min ----------------------------------------------------------------------

def blocked_head(*later):
    """4 GPUs; r holds 0-1 until +100; head needs all 4, so it is reserved at +100."""
    return snapshot(4, policy=preset("multifactor"),
                    running=[running("r", gpus=[0, 1], started_at=NOW, wall_time=100)],
                    pending=[pending("head", gpus=4, seq=0), *later])


@pytest.mark.parametrize("job, granted, reason", [
    pytest.param(pending("long", wall_time=300, time_min=60, seq=1, submitted_at=1), 100.0, None,
                 id="backfilled with a shorter limit, ending at the reservation"),
    pytest.param(pending("long", wall_time=300, time_min=100, seq=1, submitted_at=1), 100.0, None,
                 id="its time-min exactly fits"),
    pytest.param(pending("long", wall_time=300, time_min=120, seq=1, submitted_at=1), None,
                 "waiting behind job head, reserved to start in 1m40s; its wall time of 5m00s would run past "
                 "that, and so would its --time-min of 2m00s", id="its time-min would run past it: waits"),
    pytest.param(pending("short", wall_time=90, time_min=60, seq=1, submitted_at=1), None, None,
                 id="fits whole: its own wall time, nothing granted"),
    pytest.param(pending("unbounded", time_min=60, seq=1, submitted_at=1), 100.0, None,
                 id="no wall time but a time-min: granted up to the reservation"),
])
def test_time_min(job, granted, reason):
    result = plan(blocked_head(job))
    if reason is not None:
        assert result.starts == [] and result.waiting[job.id] == reason
        return
    [start] = result.starts
    assert (start.job_id, start.wall_time) == (job.id, granted)
    assert len(start.gpus) == 1 and job.id in result.backfilled


def test_time_min_needs_backfill():
    snap = blocked_head(pending("long", wall_time=300, time_min=60, seq=1, submitted_at=1))
    assert plan(replace(snap, policy=replace(snap.policy, backfill=False))).starts == []


def test_a_granted_limit_bounds_what_later_jobs_see():
    # the first backfilled job's granted end (+100) is what a second reservation counts on
    snap = blocked_head(pending("long", wall_time=300, time_min=60, seq=1, submitted_at=1),
                        pending("long2", wall_time=300, time_min=60, seq=2, submitted_at=2))
    result = plan(snap)
    assert {s.job_id: s.wall_time for s in result.starts} == {"long": 100.0, "long2": 100.0}


def test_cpu_only_jobs_get_a_time_min_before_an_exclusive_reservation():
    snap = snapshot(2, cpus=8, running=[running("r", gpus=[0], wall_time=100, started_at=NOW)],
                    pending=[pending("ex", gpus=1, exclusive=True, wall_time=50, seq=0),
                             pending("cpu", gpus=0, wall_time=500, time_min=50, seq=1, submitted_at=1)])
    [start] = plan(snap).starts
    assert (start.job_id, start.gpus, start.wall_time) == ("cpu", (), 100.0)
