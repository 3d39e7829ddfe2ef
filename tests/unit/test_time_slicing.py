"""Time slicing within a tier (gqa.scheduling.slicing): jobs that have had their
slice of GPU time rank after those that have not, which may preempt them; a
starved job is promoted back; nothing else changes when it is off."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gqa.scheduling import plan
from gqa.scheduling.index import QueueIndex
from gqa.scheduling.index_slicing import Room
from gqa.scheduling.presets import preset
from gqa.scheduling.slicing import (CATCH_UP_SLICES, DEMOTED_SLICES, demoted, may_stop, next_change, promoted_at,
                                    room_at, slicing_tiers, stoppable_at)
from tests.builders import gpus, pending, running, snapshot

NOW = snapshot().now
SLICED = replace(preset("gqa"), slice_tiers=(1,), slice_after=3_600.0, slice_min_run=120.0, slice_starve=4.0)
TIERS = slicing_tiers(SLICED)


@pytest.mark.parametrize("served, tier, submitted, gpus, expected", [
    pytest.param(0.0, "normal", NOW - 10, 1, False, id="never ran"),
    pytest.param(3_599.0, "normal", NOW - 10, 1, False, id="just under its slice"),
    pytest.param(3_600.0, "normal", NOW - 10, 1, True, id="had its slice"),
    pytest.param(3_600.0, "low", NOW - 10, 1, False, id="a tier that is not sliced"),
    # ran 1 hour on 1 GPU: promoted 1 + 4 hours after its submission
    pytest.param(3_600.0, "normal", NOW - 5 * 3_600 + 1, 1, True, id="one second before its promotion"),
    pytest.param(3_600.0, "normal", NOW - 5 * 3_600, 1, False, id="promoted"),
    # 4 GPUs: 3,600 GPU-seconds is 15 minutes run, so promoted 75 minutes after submission
    pytest.param(3_600.0, "normal", NOW - 75 * 60, 4, False, id="run time is service over GPUs"),
])
def test_which_waiting_jobs_are_demoted(served, tier, submitted, gpus, expected):
    job = pending("j", tier=tier, served=served, submitted_at=submitted, gpus=gpus)
    assert demoted(job, SLICED, TIERS, NOW) is expected


def test_the_guard_off_never_promotes_and_fifo_and_sjf_never_slice():
    job = pending("j", served=9e9, submitted_at=0.0)
    assert promoted_at(job, replace(SLICED, slice_starve=0.0)) == float("inf")
    assert not slicing_tiers(replace(SLICED, ordering="fifo")) and not slicing_tiers(replace(SLICED, ordering="sjf"))


@pytest.mark.parametrize("run, expected", [
    pytest.param(running("r", started_at=NOW - 3_600), True, id="ran its slice"),
    pytest.param(running("r", started_at=NOW - 3_000), False, id="not yet its slice"),
    pytest.param(running("r", started_at=NOW - 60, served=3_590.0), False, id="under the minimum run"),
    # served 5,000 s, promoted at submitted + 25,000 s: started before that, on GPUs no job above it
    # wanted, it runs two slices' worth (DEMOTED_SLICES), not just the minimum, before it may be stopped
    pytest.param(running("r", started_at=NOW - 200, served=5_000.0, submitted_at=NOW - 5_000), False,
                 id="started demoted: two slices' worth first"),
    pytest.param(running("r", started_at=NOW - 7_201, served=5_000.0, submitted_at=NOW - 12_000), True,
                 id="started demoted, ran two slices' worth"),
    pytest.param(running("r", gpus=(0, 1), started_at=NOW - 3_601, served=5_000.0, submitted_at=NOW - 12_000),
                 True, id="started demoted on 2 GPUs: two slices' worth of service"),
    pytest.param(running("r", gpus=(0, 1), started_at=NOW - 3_000, served=5_000.0, submitted_at=NOW - 12_000),
                 False, id="started demoted on 2 GPUs, short of two slices' worth"),
    # served 5,000 s, promoted at submitted + 25,000 s: it started promoted, so it gets a slice of its own
    pytest.param(running("r", started_at=NOW - 600, served=5_000.0, submitted_at=NOW - 30_000), False,
                 id="started promoted: a slice of its own first"),
    pytest.param(running("r", started_at=NOW - 3_600, served=5_000.0, submitted_at=NOW - 30_000), True,
                 id="started promoted, had that slice too"),
    # waited 20,000 s for its first start: queued again before it has run 20,000 / 4 s, it would
    # be promoted at once and take the GPUs back from the job it was stopped for
    pytest.param(running("r", started_at=NOW - 3_600, submitted_at=NOW - 23_600), False,
                 id="waited long: runs a quarter of its wait"),
    pytest.param(running("r", started_at=NOW - 5_002, submitted_at=NOW - 25_002), True,
                 id="waited long, ran a quarter of it"),
    # promoted at NOW - 75,000 (ran 5,000 s), started 71,400 s later: runs 71,400 / 4 s
    pytest.param(running("r", started_at=NOW - 3_600, served=5_000.0, submitted_at=NOW - 100_000), False,
                 id="started long after its promotion: up to 4 slices"),
    pytest.param(running("r", started_at=NOW - 9_999, tier=2), False, id="a tier that is not sliced"),
    pytest.param(running("r", started_at=NOW - 9_999, stopping=True), False, id="already stopping"),
    pytest.param(running("r", started_at=NOW - 9_999, started=False), False, id="still starting"),
    pytest.param(running("r", gpus=(0, 1), started_at=NOW - 1_800), True, id="service counts every GPU"),
])
def test_which_running_jobs_slicing_may_stop(run, expected):
    assert may_stop(run, SLICED, TIERS, NOW) is expected


@settings(max_examples=300, deadline=None)
@given(gpus=st.integers(1, 8), ran=st.floats(0, 50_000), waited=st.floats(0, 500_000),
       starve=st.sampled_from([1.0, 4.0, 16.0]))
def test_a_job_slicing_stops_is_demoted_when_queued_again(gpus, ran, waited, starve):
    """Whatever its history, a run slicing may stop, queued again with the service it has then,
    ranks after the jobs of its tier that have not had their slice: it cannot outrank the job it
    was stopped for and take its GPUs back. Unless it has run CATCH_UP_SLICES slices in its
    attempt: then it may be stopped however long it starved."""
    policy = replace(SLICED, slice_starve=starve)
    run = running("r", gpus=range(gpus), served=ran * gpus, submitted_at=0.0, started_at=waited + ran)
    at = stoppable_at(run, policy)
    caught_up = run.started_at + CATCH_UP_SLICES * policy.slice_after / gpus
    assert run.started_at + policy.slice_min_run <= at <= max(caught_up, run.started_at + policy.slice_min_run)
    queued = pending("r", gpus=gpus, submitted_at=0.0, served=run.attained(at))
    assert demoted(queued, policy, TIERS, at) or at == caught_up


def test_a_job_stopped_for_another_of_its_tier_does_not_swap_back():
    """An old gang, promoted after starving, runs on past its slice until it would be demoted when
    queued again: stopped at its slice's end it ranked, queued still promoted, above the job it was
    stopped for by age, and the two traded the GPUs every slice."""
    old = running("old", gpus=(0, 1), served=7_200.0, submitted_at=NOW - 41_600, started_at=NOW - 3_600)
    new = pending("new", gpus=2, submitted_at=NOW - 100)
    assert promoted_at(old, SLICED) == NOW - 23_600   # ran 3,600 s: promoted 5 x that after submission
    swapped = pending("old", gpus=2, submitted_at=NOW - 41_600, served=old.attained(NOW))
    assert plan(snapshot(2, pending=[swapped, new], policy=SLICED)).order[0] == "old"   # what stopping it now did
    waits = plan(snapshot(2, running=[old], pending=[new], policy=SLICED))   # its slice (1,800 s) is up
    assert waits.preempt == [] and "2 GPUs" in waits.waiting["new"]
    then = stoppable_at(old, SLICED)   # started 20,000 s after its promotion: runs a quarter of that
    assert then == NOW - 3_600 + 20_000 / 4 + 1
    assert plan(snapshot(2, running=[old], pending=[new], policy=SLICED, now=then)).preempt == ["old"]
    queued = pending("old", gpus=2, submitted_at=NOW - 41_600, served=old.attained(then))
    after = plan(snapshot(2, pending=[queued, new], policy=SLICED, now=then))
    assert [s.job_id for s in after.starts] == ["new"] and after.order == ["new", "old"]


def test_a_job_that_starved_for_long_runs_a_few_slices_before_slicing_may_stop_it():
    """Promoted 178,400 s before it started, it would need 44,600 s to be demoted when queued again:
    slicing waits CATCH_UP_SLICES slices (4 x 1,800 s on 2 GPUs), not half a day."""
    old = running("old", gpus=(0, 1), served=7_200.0, submitted_at=NOW - 200_000, started_at=NOW - 3_600)
    assert stoppable_at(old, SLICED) == NOW - 3_600 + CATCH_UP_SLICES * 1_800


def test_a_demoted_job_that_backfilled_runs_two_slices_worth_before_a_fresh_job_stops_it():
    """It started on a GPU no job above it wanted: stopped after the least run by each fresh job of
    its tier, it would restart once an arrival; it runs two slices' worth first."""
    backfilled = running("old", served=5_000.0, submitted_at=NOW - 10_000, started_at=NOW - 600)
    assert promoted_at(backfilled, SLICED) > NOW   # started demoted, and still is
    fresh = pending("new", submitted_at=NOW)
    waits = plan(snapshot(1, running=[backfilled], pending=[fresh], policy=SLICED))
    assert waits.preempt == [] and "1 GPU" in waits.waiting["new"]
    then = stoppable_at(backfilled, SLICED)
    assert then == NOW - 600 + DEMOTED_SLICES * 3_600 and DEMOTED_SLICES == 2
    assert plan(snapshot(1, running=[backfilled], pending=[fresh], policy=SLICED, now=then)).preempt == ["old"]


def test_a_demoted_job_ranks_after_its_tier_whatever_its_other_factors():
    favoured = pending("served", served=3_600.0, submitted_at=NOW - 3_600, team="idle", nice=-10_000,
                       wall_time=60)
    fresh = pending("fresh", submitted_at=NOW, team="busy", nice=10_000, wall_time=7 * 86_400)
    low = pending("low", tier="low", submitted_at=NOW)
    result = plan(snapshot(0, pending=[favoured, fresh, low], usage={"busy": 1e9}, policy=SLICED))
    assert result.order == ["fresh", "served", "low"]
    assert result.factors["served"].service < 0 == result.factors["fresh"].service
    off = plan(snapshot(0, pending=[favoured, fresh, low], usage={"busy": 1e9}, policy=preset("gqa")))
    assert off.order == ["served", "fresh", "low"]


def test_a_job_that_has_not_had_its_slice_preempts_the_one_that_has_had_the_most():
    runs = [running("long", gpus=[0], started_at=NOW - 7_200), running("longer", gpus=[1], started_at=NOW - 9_000),
            running("young", gpus=[2], started_at=NOW - 60)]
    result = plan(snapshot(3, running=runs, pending=[pending("new", submitted_at=NOW)], policy=SLICED))
    assert result.preempt == ["longer"]
    assert "had their 1 GPU-hour slice" in result.waiting["new"]


def test_a_demoted_job_preempts_nothing_and_a_preempted_job_does_not_come_straight_back():
    runs = [running("long", gpus=[0], started_at=NOW - 7_200)]
    demoted_job = pending("back", served=3_600.0, submitted_at=NOW - 100)
    assert plan(snapshot(1, running=runs, pending=[demoted_job], policy=SLICED)).preempt == []
    # the victim, requeued with its service, waits behind the job that preempted it
    result = plan(snapshot(1, pending=[pending("long", served=7_200.0, submitted_at=NOW - 8_000),
                                       pending("new", submitted_at=NOW)], policy=SLICED))
    assert [s.job_id for s in result.starts] == ["new"]


def test_slicing_reserves_nothing_so_a_demoted_job_backfills_freely():
    """No EASY reservation in a sliced tier: a job that cannot start leaves the free GPUs to the
    next that fits (its GPUs come from preemption instead)."""
    runs = [running("a", gpus=[0], started_at=NOW - 60, wall_time=86_400)]
    waiting = [pending("big", gpus=2, submitted_at=NOW - 10, wall_time=3_600),
               pending("small", gpus=1, submitted_at=NOW, served=4_000.0, wall_time=7 * 86_400)]
    sliced = plan(snapshot(2, running=runs, pending=waiting, policy=SLICED))
    assert [s.job_id for s in sliced.starts] == ["small"] and not sliced.reserved
    easy = plan(snapshot(2, running=runs, pending=waiting, policy=preset("gqa")))
    assert easy.starts == [] and "big" in easy.reserved


def test_off_by_default_in_every_preset():
    runs = [running("long", gpus=[0], started_at=NOW - 86_400)]
    for name in ("fifo", "fifo-easy", "multifactor", "gqa", "sjf-oracle"):
        policy = preset(name)
        assert policy.slice_tiers == ()
        assert plan(snapshot(1, running=runs, pending=[pending("new", submitted_at=NOW)], policy=policy)).preempt == []


def test_the_next_time_slicing_changes_a_decision():
    """What a loop that sleeps until something happens must wake for: a running job becoming one
    slicing may stop, or a demoted job's promotion; never a time already past."""
    runs = [running("r1", started_at=NOW - 600),                      # its slice at NOW + 3,000
            running("r2", gpus=(0, 1), started_at=NOW - 600),         # 2 GPUs: at NOW + 1,200
            running("hi", tier="high", started_at=NOW)]              # a tier not sliced
    assert [stoppable_at(r, SLICED) for r in runs[:2]] == [NOW + 3_000, NOW + 1_200]
    new = pending("new", submitted_at=NOW)                             # has not had its slice
    assert next_change(runs, [new], SLICED, NOW, free=0) == NOW + 1_200
    assert next_change(runs, [], SLICED, NOW, free=0) is None                 # no job that slicing serves waits
    starved = pending("d", served=3_600.0, submitted_at=NOW - 17_000)   # promoted at NOW + 1,000
    assert next_change(runs, [starved], SLICED, NOW, free=0) == NOW + 1_000   # demoted till then: stops nothing
    assert next_change(runs, [starved], SLICED, NOW + 1_000, free=0) == NOW + 1_200   # promoted, it may
    assert next_change(runs, [starved, new], SLICED, NOW + 5_000, free=0) is None   # all past
    assert next_change(runs, [new], preset("gqa"), NOW, free=0) is None
    assert stoppable_at(running("cpu", gpus=(), started_at=NOW), SLICED) == float("inf")


@pytest.mark.parametrize("waiting, free, expected", [
    pytest.param([1], 0, NOW + 1_200, id="one GPU: the first run slicing may stop"),
    pytest.param([3], 0, NOW + 3_000, id="three GPUs: once both may be stopped"),
    pytest.param([3], 1, NOW + 1_200, id="three, one free: the first is enough"),
    pytest.param([4], 0, NOW + 17_990, id="more than free and sliced together: only the promotion"),
    pytest.param([4], 1, NOW + 3_000, id="four, one free"),
    pytest.param([4, 3], 0, NOW + 3_000, id="the smallest job that is not demoted decides"),
    pytest.param([3], 3, NOW + 1_200, id="enough free already: each run that becomes stoppable"),
])
def test_slicing_wakes_a_loop_only_once_it_may_stop_enough_gpus_for_a_waiting_job(waiting, free, expected):
    """A run that becomes one slicing may stop changes nothing while the GPUs it and those before it
    would give back, with the free ones, are fewer than the smallest waiting job that is not demoted
    needs: a loop that woke then would run a pass that decides nothing."""
    runs = [running("r1", gpus=(2,), started_at=NOW - 600), running("r2", gpus=(0, 1), started_at=NOW - 600)]
    jobs = [pending(f"w{n}", gpus=size, submitted_at=NOW) for n, size in enumerate(waiting)]
    jobs.append(pending("had-slice", served=3_600.0, submitted_at=NOW - 10))   # demoted until NOW + 17,990
    assert next_change(runs, jobs, SLICED, NOW, free=free) == expected


@pytest.mark.parametrize("need, base, stops, expected", [
    (2, 2, [], -float("inf")),
    (2, 0, [(5.0, 1), (7.0, 1), (9.0, 4)], 7.0),
    (2, 1, [(5.0, 4)], 5.0),
    (6, 0, [(5.0, 1), (7.0, 1)], None),
    (2, 0, [(5.0, 1), (float("inf"), 4)], None),   # a run slicing never stops gives nothing
])
def test_room_at_counts_gpus_in_the_order_slicing_may_stop_them(need, base, stops, expected):
    assert room_at(need, base, stops) == expected


def test_the_index_knows_which_tiers_wait_on_slicing_and_when_it_next_may_stop_a_job():
    """What the replay wakes for, read from the index: a running job becoming one slicing may stop
    matters only to a tier where a job that is not demoted waits, and only once the GPUs slicing
    may stop there, with the free ones, are enough for the smallest such job."""
    index = QueueIndex(gpus(4), SLICED)
    index.start(running("r1", started_at=NOW - 600))                    # stoppable at NOW + 3,000
    index.start(running("r2", gpus=(1, 2), started_at=NOW - 600))       # at NOW + 1,200
    index.add(pending("d", served=3_600.0, submitted_at=NOW - 17_000))   # demoted until NOW + 1,000
    ranked = index.ranked
    ranked.advance(NOW)
    assert ranked.least_undemoted(1) is None
    assert index.next_sliceable(NOW) == NOW + 1_200
    assert index.next_slicing_change(NOW) == NOW + 1_000   # its promotion
    assert next_change(index.running.values(), index.pending.values(), SLICED, NOW, free=1) == NOW + 1_000
    assert index.next_sliceable(NOW, tiers=[]) is None
    assert not index.may_slice(1, NOW) and index.sliced(1, NOW) == [] and not index.slicing_may_stop(NOW)
    ranked.advance(NOW + 1_000)   # promoted: it may now stop jobs that have had their slice
    assert ranked.least_undemoted(1) == 1
    assert index.next_slicing_change(NOW + 1_000) == NOW + 1_200
    assert index.may_slice(1, NOW + 1_200) and [r.id for r in index.sliced(1, NOW + 1_200)] == ["r2"]
    assert index.slicing_may_stop(NOW + 1_200) == {1}
    index.stop("r2")
    assert index.next_sliceable(NOW + 1_200) == NOW + 3_000
    index.add(pending("new", submitted_at=NOW))
    assert ranked.least_undemoted(1) == 1 and ranked.least_undemoted(2) is None
    index.remove("d")
    index.remove("new")
    index.add(pending("gang", gpus=4, submitted_at=NOW))   # 3 free and r1's 1 GPU at NOW + 3,000
    assert index.next_slicing_change(NOW + 1_200) == NOW + 3_000
    assert not index.slicing_may_stop(NOW + 2_000)
    index.start(running("r3", gpus=(1,), started_at=NOW + 1_200))   # 2 free: r1's GPU is not enough
    r3_at = stoppable_at(index.running["r3"], SLICED)
    assert r3_at > NOW + 3_000 and index.next_slicing_change(NOW + 2_000) == r3_at
    assert not index.slicing_may_stop(NOW + 3_000) and index.slicing_may_stop(r3_at) == {1}


def test_a_pass_asks_slicing_only_where_it_may_stop_enough_gpus_for_a_waiting_job(monkeypatch):
    """One GPU free and one run slicing may stop: a waiting 4-GPU gang that has not had its slice
    cannot get room, so a pass asks slicing nothing for it, and decides what one that asks does;
    a 2-GPU job can, and stops that run."""
    runs = [running("r1", started_at=NOW - 4_000),                  # stoppable since NOW - 400
            running("r2", gpus=(1, 2), started_at=NOW - 600)]       # from NOW + 1,200
    gang, pair = pending("gang", gpus=4, submitted_at=NOW - 60), pending("pair", gpus=2, submitted_at=NOW - 30)
    index = QueueIndex(gpus(4), SLICED)
    for run in runs:
        index.start(run)
    index.add(gang)
    index.rank().advance(NOW)
    assert not index.slicing_may_stop(NOW) and index.next_slicing_change(NOW) == NOW + 1_200
    alone = snapshot(running=runs, pending=[gang], policy=SLICED)
    assert (plan(alone, explain=False).preempt, plan(alone).preempt) == ([], [])
    index.add(pair)
    assert index.slicing_may_stop(NOW) == {1}
    both = snapshot(running=runs, pending=[gang, pair], policy=SLICED)
    assert plan(both, explain=False).preempt == plan(both).preempt == ["r1"]
    monkeypatch.setattr(QueueIndex, "slicing_may_stop",   # GPUs not counted: asked for the gang too
                        lambda self, now: frozenset(t for t in self.slicing if self.may_slice(t, now)))
    assert plan(alone).preempt == [] and plan(both).preempt == ["r1"]


def test_a_room_counts_the_runs_slicing_may_stop_only_as_far_as_asked():
    stops = iter([2, 4, 1])
    room = Room(1, stops)
    assert room.holds(1) and room.gpus == 1            # the free GPUs were enough: no run counted
    assert room.holds(3) and room.gpus == 3            # one run counted
    assert not room.holds(9) and room.gpus == 8        # all counted, and still too few
    assert next(stops, None) is None


@pytest.mark.parametrize("kept", [False, True], ids=["built for the pass", "kept between passes"])
def test_a_pass_that_has_stopped_every_run_slicing_may_stop_reads_no_further(kept):
    """No GPU free, three 1-GPU runs slicing may stop, and 200 fresh jobs: a pass that explains
    nothing stops the three for the first three jobs, then has nothing left to give, so it stops
    there rather than look at the 197 behind them (a dispatcher's pass at 100,000 pending looked
    at two thirds of them). It decides what an explaining pass decides."""
    runs = [running(f"r{i}", gpus=(i,), started_at=NOW - 4_000 - i) for i in range(3)]
    jobs = [pending(f"j{i:03}", submitted_at=NOW - 1_000 + i) for i in range(200)]
    snap = snapshot(3, running=runs, pending=jobs, policy=SLICED)
    explained = plan(snap)
    if kept:
        index = QueueIndex.of(snap.gpus, snap.policy, snap.pending, snap.running, snap.now)
        snap = replace(snap, pending=index.pending_view, running=index.running_view)
    fast = plan(snap, explain=False)
    assert sorted(fast.preempt) == sorted(explained.preempt) == ["r0", "r1", "r2"]
    assert fast.starts == explained.starts == []
    assert fast.order == ["j000", "j001", "j002"] and len(explained.order) == 200
