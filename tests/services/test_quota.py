"""QuotaService: the view `gqa quota show` prints on both backends, and the
rules every change must meet whoever sends it (CLI or API)."""

import math

import pytest

from gqa.models.errors import SpecError
from gqa.scheduling.snapshot import TeamPolicy
from gqa.services.quota import QuotaService, TeamQuota
from tests.services.fakes import CountingWaker


def test_the_view_lists_configured_teams_and_teams_holding_gpus(queue):
    quota = QuotaService(queue.store)
    quota.set("vision", share=2.0, max_gpus=8)
    queue.start(team="nlp", resources={"gpus": 3})
    view = quota.show()
    assert view.teams == [TeamQuota("nlp", TeamPolicy(), 3, False),
                          TeamQuota("vision", TeamPolicy(share=2.0, max_gpus=8), 0, True)]
    assert view.policy == quota.policy() == queue.store.policy()


@pytest.mark.parametrize("team, changes, words", [
    ("vi sion", {}, "not a valid team name"),
    ("vision", {"share": 0}, "share must be positive"),
    ("vision", {"max_gpus": -2}, "max_gpus must be a GPU count"),
    ("vision", {"max_gpus_per_user": -5}, "max_gpus_per_user must be a GPU count"),
    ("vision", {"budget": -3}, "budget must be an amount >= 0"),
    ("vision", {"share": math.nan}, "share must be a finite number, got nan"),
    ("vision", {"budget": math.inf}, "budget must be a finite number, got inf"),
    ("vision", {"max_gpus": 10**20}, "max_gpus must be at most 1,000,000 GPUs; got 100,000,000,000,000,000,000"),
    ("vision", {"max_gpus_per_user": 1_000_001}, "max_gpus_per_user must be at most 1,000,000 GPUs"),
    ("vision", {"budget": 1e300}, "budget must be at most 1,000,000,000,000; got 1e"),
])
def test_bad_team_changes_are_refused_and_nothing_is_written(queue, team, changes, words):
    with pytest.raises(SpecError, match=words):
        QuotaService(queue.store).set(team, **changes)
    assert queue.store.teams() == {}


@pytest.mark.parametrize("changes, words", [
    ({"max_gpus_per_job": 0}, "max_gpus_per_job must be a GPU count"),
    ({"max_wall_time": 0}, "max_wall_time must be positive"),
    ({"half_life": -1}, "half_life must be positive"),
    ({"age_weight": -0.5}, "age_weight must be >= 0"),
    ({"duration_weight": -1.0}, "duration_weight must be >= 0"),
    ({"age_weight": math.nan}, "age_weight must be a finite number, got nan"),
    ({"duration_weight": math.inf}, "duration_weight must be a finite number, got inf"),
    ({"slice_starve": math.nan}, "slice_starve must be a finite number"),
    ({"max_wall_time": math.inf}, "max_wall_time must be a finite number"),
    ({"budget_alerts": (50.0, math.nan)}, r"budget_alerts must be a finite number, got \(50.0, nan\)"),
    ({"preempt_tiers": (0,)}, "preempt_tiers takes 1"),
    ({"approval_cost": -2}, "approval_cost must be >= 0"),
    ({"alert_pending_after": 0}, "alert_pending_after must be positive"),
    ({"idle_gpu_percent": 120}, "idle_gpu_percent must be from 0 to 100"),
    ({"budget_alerts": (50.0, 0.0)}, "budget_alerts are percentages"),
    ({"max_gpus_per_job": 10**20}, "max_gpus_per_job must be at most 1,000,000 GPUs"),
    ({"max_wall_time": 1e12}, r"max_wall_time must be at most 3,153,600,000 seconds \(100 years\)"),
    ({"approval_gpu_hours": 1e13}, "approval_gpu_hours must be at most 1,000,000,000,000"),
    ({"backfill_by": "guesses"}, "backfill counts run times by limits or predictions, not 'guesses'"),
])
def test_bad_policy_changes_are_refused_and_nothing_is_written(queue, changes, words):
    before = queue.store.policy()
    with pytest.raises(SpecError, match=words):
        QuotaService(queue.store).set_policy(**changes)
    assert queue.store.policy() == before


def test_minus_one_removes_a_cap(queue):
    quota = QuotaService(queue.store)
    quota.set("vision", max_gpus=4, budget=10.0)
    assert quota.set("vision", max_gpus=-1, budget=-1) == TeamPolicy()


def test_each_change_wakes_the_dispatcher_so_held_jobs_go_at_once(queue):
    # a raised budget released its held jobs only at the next tick: 10-60 s with the GPUs free
    waker = CountingWaker()
    quota = QuotaService(queue.store, waker)
    quota.set("vision", budget=100.0)
    quota.set_policy(max_gpus_per_job=2)
    assert waker.wakes == 2
    with pytest.raises(SpecError):
        quota.set("vision", budget=-3)
    assert waker.wakes == 2    # nothing written, nobody woken
