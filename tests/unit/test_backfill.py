"""EASY backfill: a later job starts now only if it provably cannot delay a
reserved one (its wall time ends before the reservation, or it uses GPUs the
reservation does not need); FIFO and no-backfill block instead."""

from dataclasses import replace

import pytest

from gqa.scheduling import plan
from gqa.scheduling.presets import preset
from tests.builders import pending, running, snapshot

NOW = snapshot().now
MULTIFACTOR = preset("multifactor")
MIN = 60.0


def started(result) -> list[str]:
    return [s.job_id for s in result.starts]


# 4 GPUs; r holds 0-1 until NOW+100s (its wall time); "head" needs all 4
def head_blocked(*later, policy=None):
    # multifactor: no duration factor, so "head" (submitted first) is considered first
    return snapshot(4, policy=policy or MULTIFACTOR,
                    running=[running("r", gpus=[0, 1], started_at=NOW - 50, wall_time=150)],
                    pending=[pending("head", gpus=4, submitted_at=0, seq=0), *later])


@pytest.mark.parametrize("later, starts, reason", [
    pytest.param(pending("short", wall_time=90, submitted_at=1, seq=1), ["short"], None,
                 id="ends before the reservation: backfilled"),
    pytest.param(pending("long", wall_time=200, submitted_at=1, seq=1), [],
                 "waiting behind job head, reserved to start in 1m40s; its wall time of 3m20s would run past that",
                 id="would run past the reservation: waits"),
    pytest.param(pending("unknown", submitted_at=1, seq=1), [],
                 "waiting behind job head, reserved to start in 1m40s; it has no wall time",
                 id="no wall time: cannot prove it: waits"),
])
def test_easy_backfill_against_the_head_reservation(later, starts, reason):
    result = plan(head_blocked(later))
    assert started(result) == starts
    assert result.reserved == {"head": NOW + 100}
    if starts:
        assert result.backfilled == set(starts)
    else:
        assert result.waiting[later.id] == reason


def test_without_backfill_the_head_blocks_everything():
    result = plan(head_blocked(pending("short", wall_time=90, submitted_at=1, seq=1),
                               policy=replace(MULTIFACTOR, backfill=False)))
    assert started(result) == [] and result.reserved == {}
    assert result.waiting["short"] == "waiting behind job head, which is first in line for GPUs"


def test_fifo_ignores_tiers_and_blocks():
    snap = snapshot(2, policy=preset("fifo"), running=[running("r", gpus=[0], wall_time=100, started_at=NOW)],
                    pending=[pending("big", gpus=2, tier=2, submitted_at=0),
                             pending("hi", tier=0, submitted_at=5, seq=1)])
    result = plan(snap)
    assert result.order == ["big", "hi"] and started(result) == []


def test_gpus_free_now_are_left_for_long_jobs_when_the_head_can_wait_for_others():
    # 8 GPUs: r1 holds 0-3 until +100, r2 holds 4-5 until +50, 6-7 free; head needs 6 -> starts at +100
    # on 0-5, so 6-7 are not needed by it and a long job may take them
    snap = snapshot(8, running=[running("r1", gpus=[0, 1, 2, 3], wall_time=100, started_at=NOW),
                                running("r2", gpus=[4, 5], wall_time=50, started_at=NOW)],
                    pending=[pending("head", gpus=6, seq=0, submitted_at=0),
                             pending("long", gpus=2, wall_time=10_000, seq=1, submitted_at=1)])
    result = plan(snap)
    assert result.reserved == {"head": NOW + 100}
    assert [(s.job_id, s.gpus) for s in result.starts] == [("long", (6, 7))]


def test_running_jobs_without_wall_time_make_the_reservation_unknowable():
    snap = snapshot(4, policy=MULTIFACTOR, running=[running("r", gpus=[0, 1], started_at=NOW)],
                    pending=[pending("head", gpus=4, seq=0), pending("short", wall_time=10, seq=1, submitted_at=1)])
    result = plan(snap)
    assert started(result) == [] and result.reserved == {"head": float("inf")}
    assert "nothing can be backfilled safely" in result.waiting["short"]


def test_each_tier_protects_its_first_blocked_job():
    # high "h" and normal "n" both blocked; a low job may only backfill if it delays neither
    snap = snapshot(4, running=[running("r", gpus=[0, 1, 2], wall_time=100, started_at=NOW)],
                    pending=[pending("h", gpus=4, tier=0, seq=0), pending("n", gpus=3, tier=1, seq=1),
                             pending("low", tier=2, wall_time=150, seq=2)])
    result = plan(snap)
    assert set(result.reserved) == {"h", "n", "low"}
    assert result.reserved["h"] == NOW + 100
    assert started(result) == []  # the free GPU is booked by h at +100 and low runs to +150


# 8 GPUs: r1 holds 0-3 until +100, r2 holds 4-6 until +1000, GPU 7 free. "a" (normal, 4 GPUs) is
# reserved 0-3 from +100; "b" (low, 4 GPUs), if reserved too, books 4-7 from +1000, and a 1-GPU job of
# 2,000 s on GPU 7 would run past that
def second_tier_blocked(policy):
    return snapshot(8, policy=policy,
                    running=[running("r1", gpus=[0, 1, 2, 3], started_at=NOW, wall_time=100),
                             running("r2", gpus=[4, 5, 6], started_at=NOW, wall_time=1000)],
                    pending=[pending("a", gpus=4, tier="normal", submitted_at=1, wall_time=5000),
                             pending("b", gpus=4, tier="low", submitted_at=2, wall_time=500),
                             pending("c", tier="low", submitted_at=3, wall_time=2000)])


@pytest.mark.parametrize("name, reserved, starts", [
    ("fifo-easy", {"a"}, ["c"]),          # arrival order reads no tier: EASY's one reservation
    ("multifactor", {"a", "b"}, []),      # tiers ranked strictly: each tier's first blocked job is protected
    ("gqa", {"a", "b"}, []),
])
def test_an_order_that_reads_no_tier_reserves_for_its_first_blocked_job_alone(name, reserved, starts):
    result = plan(second_tier_blocked(preset(name)))
    assert set(result.reserved) == reserved and started(result) == starts


@pytest.mark.parametrize("name", ["multifactor", "gqa"])
def test_backfilling_presets(name):
    result = plan(head_blocked(pending("short", wall_time=90, submitted_at=1, seq=1), policy=preset(name)))
    assert started(result) == ["short"]


def test_gqa_prefers_short_expected_jobs_within_a_tier():
    snap = snapshot(1, policy=preset("gqa"),
                    pending=[pending("long", wall_time=86_400, submitted_at=0, seq=0),
                             pending("short", wall_time=600, submitted_at=10, seq=1)])
    assert plan(snap).order == ["short", "long"]
    assert plan(snap.__class__(**{**snap.__dict__, "policy": preset("multifactor")})).order == ["long", "short"]


def test_expected_runtime_overrides_the_wall_time_for_ordering():
    snap = snapshot(1, policy=preset("gqa"),
                    pending=[pending("a", wall_time=600, expected_runtime=50_000, seq=0),
                             pending("b", wall_time=86_400, expected_runtime=300, seq=1, submitted_at=1)])
    result = plan(snap)
    assert result.order == ["b", "a"] and result.factors["b"].duration > result.factors["a"].duration


@pytest.mark.parametrize("later, starts", [
    pytest.param(pending("short", wall_time=90, submitted_at=1, seq=1), ["short"], id="ends before: backfilled"),
    pytest.param(pending("long", wall_time=200, submitted_at=1, seq=1), [], id="would delay the head: waits"),
])
def test_fifo_easy_backfills_around_a_blocked_head_without_delaying_it(later, starts):
    result = plan(head_blocked(later, policy=preset("fifo-easy")))
    assert result.order == ["head", later.id]      # arrival order, as fifo's
    assert started(result) == starts and result.reserved == {"head": NOW + 100}
    assert plan(head_blocked(later, policy=preset("fifo"))).starts == []


def test_sjf_orders_by_expected_run_time_within_a_tier():
    # the oracle hands plan() true run times as expected_runtime; tiers stay strict
    snap = snapshot(1, policy=preset("sjf-oracle"),
                    pending=[pending("long", wall_time=600, expected_runtime=500, submitted_at=0, seq=0),
                             pending("short", wall_time=86_400, expected_runtime=50, submitted_at=9, seq=1),
                             pending("tie", wall_time=50, submitted_at=10, seq=2),
                             pending("urgent", tier=0, expected_runtime=9_000, submitted_at=20, seq=3)])
    assert plan(snap).order == ["urgent", "short", "tie", "long"]


# backfill by predictions (horizon.py): expected run times stand in for the limits
PREDICTING = replace(MULTIFACTOR, backfill_by="predictions")


def test_by_predictions_a_job_expected_to_end_before_the_reservation_is_backfilled():
    # r is expected to end at +100 (its limit +150 would be the same, counted by limits: see head_blocked)
    later = pending("long-limit", wall_time=3_600, expected_runtime=90, submitted_at=1, seq=1)
    assert started(plan(head_blocked(later))) == []
    result = plan(head_blocked(later, policy=PREDICTING))
    assert started(result) == ["long-limit"] and result.backfilled == {"long-limit"}


def test_by_predictions_the_reservation_counts_on_the_expected_ends():
    # r asks 10 hours and is expected to run 1: head is reserved for when r is expected to end
    snap = snapshot(4, policy=PREDICTING,
                    running=[running("r", gpus=[0, 1], started_at=NOW, wall_time=36_000, expected_runtime=3_600)],
                    pending=[pending("head", gpus=4, seq=0), pending("job", wall_time=7_200, expected_runtime=5_400,
                                                                    submitted_at=1, seq=1)])
    result = plan(snap)
    assert result.reserved == {"head": NOW + 3_600}
    assert result.waiting["job"] == ("waiting behind job head, reserved to start in 1h00m; "
                                     "its expected run of 1h30m would run past that")
    assert plan(replace(snap, policy=MULTIFACTOR)).reserved == {"head": NOW + 36_000}


def test_by_predictions_a_job_that_outlived_its_prediction_is_counted_twice_as_long():
    snap = snapshot(4, policy=PREDICTING,
                    running=[running("r", gpus=[0, 1], started_at=NOW - 4_000, wall_time=36_000,
                                     expected_runtime=3_600)],
                    pending=[pending("head", gpus=4, seq=0)])
    assert plan(snap).reserved == {"head": NOW - 4_000 + 7_200}


def test_by_predictions_jobs_without_estimates_count_their_limits():
    assert plan(head_blocked(pending("long", wall_time=200, submitted_at=1, seq=1), policy=PREDICTING)).starts == []
