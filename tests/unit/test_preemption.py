"""Preemption: opt-in per tier, least work lost first, never twice for one shortage."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gqa.scheduling import plan
from gqa.scheduling.presets import preset
from tests.builders import pending, running, snapshot

NOW = snapshot().now
POLICY = replace(preset("gqa"), preempt_tiers=(2,))


def full(*runs, waiting=None, policy=POLICY, gpus=2):
    return snapshot(gpus, policy=policy, running=list(runs),
                    pending=[waiting or pending("hi", tier=0, gpus=1, wall_time=600)])


@pytest.mark.parametrize("runs, victims", [
    pytest.param([running("low-old", tier=2, gpus=[0], started_at=NOW - 3600),
                  running("low-new", tier=2, gpus=[1], started_at=NOW - 60)], ["low-new"],
                 id="least elapsed loses least"),
    pytest.param([running("a", tier=2, gpus=[0], started_at=NOW - 3600, checkpointed_at=NOW - 10),
                  running("b", tier=2, gpus=[1], started_at=NOW - 60)], ["a"],
                 id="a fresh checkpoint loses least"),
    pytest.param([running("normal", tier=1, gpus=[0], started_at=NOW),
                  running("low", tier=2, gpus=[1], started_at=NOW - 9999)], ["low"],
                 id="only preemptible tiers"),
    pytest.param([running("n1", tier=1, gpus=[0]), running("n2", tier=1, gpus=[1])], [],
                 id="nothing preemptible: it waits"),
])
def test_victims(runs, victims):
    result = plan(full(*runs))
    assert result.preempt == victims
    assert result.starts == []


def test_off_by_default_and_in_the_presets():
    runs = [running("low", tier=2, gpus=[0]), running("low2", tier=2, gpus=[1])]
    for policy in (preset("gqa"), preset("multifactor"), preset("fifo")):
        assert plan(full(*runs, policy=policy)).preempt == []


@pytest.mark.parametrize("name", ["gqa", "multifactor", "sjf-oracle"])
def test_a_victim_queued_again_in_its_place_ranks_behind_the_job_it_was_stopped_for(name):
    # low arrived first and keeps its place when queued again: were it ranked ahead of hi then, it
    # would start again on the GPU it gave up, and be stopped again, pass after pass
    policy = replace(preset(name), preempt_tiers=(2,))
    hi = pending("hi", tier=0, submitted_at=50.0, wall_time=600, seq=1)
    first = plan(snapshot(1, policy=policy, pending=[hi],
                          running=[running("low", tier=2, gpus=[0], started_at=NOW - 60, submitted_at=0.0,
                                           wall_time=600)]))
    assert first.preempt == ["low"]
    low = pending("low", tier=2, submitted_at=0.0, wall_time=600, seq=0, served=60.0)
    second = plan(snapshot(1, policy=policy, now=NOW + 1, pending=[hi, low]))
    assert [s.job_id for s in second.starts] == ["hi"] and second.preempt == []


def test_arrival_order_cannot_preempt_by_tier():
    # it never reads a tier, so the victim above would start again at once; the fifo presets drop
    # the tiers a queue's policy preempts
    with pytest.raises(ValueError, match="fifo ordering ranks by arrival alone.*preempt_tiers \\[2\\]"):
        replace(preset("fifo"), preempt_tiers=(2,))
    assert preset("fifo", POLICY).preempt_tiers == () == preset("fifo-easy", POLICY).preempt_tiers
    assert preset("gqa", POLICY).preempt_tiers == (2,)


def test_a_gang_gets_enough_victims_of_one_type():
    runs = [running(f"l{i}", tier=2, gpus=[i], started_at=NOW - i) for i in range(4)]
    result = plan(full(*runs, gpus=4, waiting=pending("hi", tier=0, gpus=3, wall_time=60)))
    assert sorted(result.preempt) == ["l0", "l1", "l2"]


def test_gpus_already_stopping_count_first():
    runs = [running("going", tier=2, gpus=[0], stopping=True), running("low", tier=2, gpus=[1])]
    result = plan(full(*runs))
    assert result.preempt == [] and "preempted jobs have stopped" in result.waiting["hi"]


def test_a_lower_or_equal_tier_never_preempts():
    runs = [running("l0", tier=2, gpus=[0]), running("l1", tier=2, gpus=[1])]
    assert plan(full(*runs, waiting=pending("low", tier=2))).preempt == []


def test_waiting_on_a_reservation_is_not_a_shortage():
    # a free GPU exists but is booked for an earlier blocked job: no preemption for that
    runs = [running("low", tier=2, gpus=[0], wall_time=100, started_at=NOW)]
    snap = snapshot(2, policy=POLICY, running=runs,
                    pending=[pending("head", tier=0, gpus=2, wall_time=60, seq=0),
                             pending("next", tier=0, gpus=1, wall_time=600, seq=1, submitted_at=1)])
    result = plan(snap)
    assert result.preempt == ["low"]   # for the head: the whole machine


def test_a_partly_free_pool_preempts_only_what_is_missing():
    """One GPU free, two wanted: one victim, not two (free GPUs are counted per pool)."""
    runs = [running("low-a", tier=2, gpus=[1], started_at=NOW - 60),
            running("low-b", tier=2, gpus=[2], started_at=NOW - 120)]
    result = plan(full(*runs, gpus=3, waiting=pending("hi", tier=0, gpus=2, wall_time=60)))
    assert result.preempt == ["low-a"]


def test_a_larger_victim_makes_a_smaller_one_chosen_before_it_unneeded():
    runs = [running("small", tier=2, gpus=[0], started_at=NOW - 10),
            running("large", tier=2, gpus=[1, 2], started_at=NOW - 20)]
    result = plan(full(*runs, gpus=3, waiting=pending("hi", tier=0, gpus=2, wall_time=60)))
    assert result.preempt == ["large"]


def draw_low_tier(data, ran_up_to: int):
    """A cluster of 2-8 GPUs, some free, the rest held by low-tier jobs of random sizes that have
    run up to `ran_up_to` seconds, and a gang size more than the free GPUs hold."""
    gpus = data.draw(st.integers(2, 8), label="gpus")
    free = data.draw(st.sets(st.integers(0, gpus - 1), max_size=gpus - 1), label="free")
    busy = [i for i in range(gpus) if i not in free]
    runs = []
    while busy:
        size = data.draw(st.integers(1, len(busy)), label="size")
        held, busy = busy[:size], busy[size:]
        runs.append(running(f"low{len(runs)}", tier=2, gpus=held,
                            started_at=NOW - data.draw(st.integers(1, ran_up_to))))
    return gpus, free, runs, data.draw(st.integers(len(free) + 1, gpus), label="want")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_victims_suffice_and_none_is_stopped_for_nothing(data):
    """Whatever runs and whatever is free, the victims free enough GPUs, and dropping any
    one of them would not: preemption never stops more work than it needs."""
    gpus, free, runs, want = draw_low_tier(data, ran_up_to=9999)
    result = plan(full(*runs, gpus=gpus, waiting=pending("hi", tier=0, gpus=want, wall_time=60)))
    freed = {r.id: len(r.gpus) for r in runs}
    stopped = sum(freed[v] for v in result.preempt)
    assert len(free) + stopped >= want
    assert all(len(free) + stopped - freed[v] < want for v in result.preempt)


# a tier that slices reserves nothing, so only the hold keeps the free GPUs for the job that preempts
SLICING = replace(preset("gqa-slice"), preempt_tiers=(2,))


@pytest.mark.parametrize("policy", [POLICY, SLICING], ids=["preempt", "preempt and slice"])
def test_the_free_gpus_a_preemption_counts_on_go_to_no_later_job(policy):
    """GPU 0 is free, 1-3 run low jobs; the high gang of 4 stops them. A short low job ranked
    after it must not start on GPU 0: the victims would have stopped for nothing, and the next
    pass would stop it in turn (on a real trace: 1.26 million preemptions for 2,754 jobs)."""
    runs = [running(f"l{i}", tier=2, gpus=[i], started_at=NOW - 600) for i in (1, 2, 3)]
    snap = snapshot(4, policy=policy, running=runs,
                    pending=[pending("hi", tier=0, gpus=4, wall_time=3600, seq=0),
                             pending("next", tier=2, gpus=1, wall_time=60, seq=1, submitted_at=1)])
    result = plan(snap)
    assert sorted(result.preempt) == ["l1", "l2", "l3"]
    assert result.starts == []
    assert "next" in result.waiting


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_gang_that_preempts_starts_in_the_next_pass(data):
    """Whatever runs and waits below it, once its victims have stopped (at once: they checkpoint
    on the way out) the next pass starts the job that preempted, and stops nothing more."""
    policy = data.draw(st.sampled_from([POLICY, SLICING]), label="policy")
    # under 2 minutes in: slicing stops none of them, so a stop in the second pass is churn
    gpus, free, runs, want = draw_low_tier(data, ran_up_to=100)
    small = [pending(f"small{i}", tier=2, gpus=data.draw(st.integers(1, gpus), label="small gpus"),
                     wall_time=data.draw(st.sampled_from([60, 600, 36000]), label="wall"), seq=1 + i,
                     submitted_at=1 + i) for i in range(data.draw(st.integers(0, 4), label="smalls"))]
    hi = pending("hi", tier=0, gpus=want, wall_time=3600, seq=0)
    first = plan(snapshot(gpus, policy=policy, running=runs, pending=[hi, *small]))
    assert first.preempt and "hi" not in {s.job_id for s in first.starts}
    left = [r for r in runs if r.id not in first.preempt]
    started = {s.job_id: s.gpus for s in first.starts}
    left += [running(j.id, tier=2, gpus=started[j.id], started_at=NOW) for j in small if j.id in started]
    waiting = [hi, *(j for j in small if j.id not in started), *(pending(v, tier=2, seq=100 + k, submitted_at=100 + k)
                                                               for k, v in enumerate(first.preempt))]
    second = plan(snapshot(gpus, policy=policy, running=left, pending=waiting, now=NOW + 1))
    assert "hi" in {s.job_id for s in second.starts} and second.preempt == []
