"""Preemption: opt-in per tier, least work lost first, never twice for one shortage."""

from dataclasses import replace

import pytest

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
