"""Budgets hold jobs with the arithmetic; approvals have thresholds."""

import pytest

from gqa.scheduling import Gpu, Policy, plan
from gqa.scheduling.budget import (TeamSpend, approval_reasons, gpu_hours_cap, gpus_rate, period_of, price_for,
                                   running_cost, spent_text, unbounded_cost, used_text)
from tests.builders import pending, running, snapshot

NOW = snapshot().now
PRICED = tuple(Gpu(i, "a10g", price=2.0) for i in range(4))  # $2 per GPU-hour


def priced(*pend, run=(), budget=100.0, spend=0.0):
    return snapshot(PRICED, pending=list(pend), running=list(run), teams={"vision": {"budget": budget}},
                    spend={"vision": spend})


HOUR = 3600.0


@pytest.mark.parametrize("runs, cost", [
    # a running attempt costs its GPUs' price from its start until now
    ([running("r", team="vision", gpus=[0, 1], started_at=NOW - HOUR)], 4.0),
    ([running("r", team="vision", gpus=[0], started_at=NOW - HOUR / 2)], 1.0),
    # a STARTING attempt has cost nothing yet, whatever started_at its record still holds
    # (the previous attempt's, or 0 for a first attempt)
    ([running("s", team="vision", gpus=[0, 1], started_at=NOW - 5 * HOUR, started=False)], 0.0),
    ([running("s", team="vision", gpus=[2], started_at=0.0, started=False)], 0.0),
    ([running("r", team="vision", gpus=[0], started_at=NOW - HOUR),
      running("s", team="vision", gpus=[1], started_at=0.0, started=False)], 2.0),
    # a clock behind a start costs nothing, never a negative amount
    ([running("r", team="vision", gpus=[0], started_at=NOW + 60)], 0.0),
    # GPUs the inventory no longer lists (a daemon restarted with fewer) still cost while the job runs
    ([running("r", team="vision", gpus=[6, 7], started_at=NOW - HOUR)], 4.0),
])
def test_running_cost_counts_only_attempts_that_started(runs, cost):
    assert running_cost(runs, PRICED, NOW).get("vision", 0.0) == pytest.approx(cost)


MIXED = {0: 4.0, 1: 0.5, 2: 0.5}   # one dear GPU, two cheap ones


@pytest.mark.parametrize("held, rate", [
    ((), 0.0),
    ((1, 2), 1.0),                 # listed: their own prices
    ((1, 5), 1.0),                 # one gone: a gang never spans two pools, so it costs as the one listed
    ((5, 6), 8.0),                 # all gone: each as the dearest GPU listed
    ((0, 5), 8.0),
])
def test_a_gpu_no_longer_listed_is_priced_as_the_queue_would_price_it(held, rate):
    assert gpus_rate(held, MIXED) == pytest.approx(rate)
    assert gpus_rate(held, {}) == 0.0       # no inventory, no prices


@pytest.mark.parametrize("run, committed", [
    # a running attempt may still cost what is left of its wall time
    (running("r", team="vision", gpus=[0], started_at=NOW - 2 * HOUR, wall_time=5 * HOUR), 6.0),
    # a STARTING one all of it: a stale started_at must not make it look nearly done
    (running("s", team="vision", gpus=[0], started_at=NOW - 4 * HOUR, wall_time=5 * HOUR, started=False), 10.0),
    (running("s", team="vision", gpus=[0], started_at=0.0, wall_time=5 * HOUR, started=False), 10.0),
    # on a GPU the inventory no longer lists, as on one it does
    (running("r", team="vision", gpus=[9], started_at=NOW - 2 * HOUR, wall_time=5 * HOUR), 6.0),
])
def test_budget_counts_what_running_and_starting_jobs_may_still_cost(run, committed):
    job = pending("a", team="vision", gpus=1, wall_time=HOUR * 10)   # a $20 cap
    result = plan(priced(job, run=[run], budget=25.0, spend=0.0))
    assert result.hold["a"].startswith(f"team vision budget: spent $0.00 + ${committed:.2f} its running jobs may "
                                       f"still cost + $20.00 for this job")


def test_a_job_that_fits_the_budget_starts():
    result = plan(priced(pending("a", team="vision", gpus=2, wall_time=3600 * 10), spend=50))  # $40 cap
    assert [s.job_id for s in result.starts] == ["a"] and result.hold == {}


def test_over_budget_is_held_with_the_arithmetic():
    run = running("r", team="vision", gpus=[0], started_at=NOW, wall_time=3600 * 5)  # $10 still to come
    result = plan(priced(pending("a", team="vision", gpus=2, wall_time=3600 * 10), run=[run], spend=60))
    assert result.starts == []
    assert result.hold["a"] == ("team vision budget: spent $60.00 + $10.00 its running jobs may still cost + "
                                "$40.00 for this job = $110.00, over $100.00 this period")


def test_jobs_started_in_the_same_pass_count_against_the_budget():
    jobs = [pending(f"j{i}", team="vision", wall_time=3600 * 10, seq=i, submitted_at=i) for i in range(3)]  # $20 each
    result = plan(priced(*jobs, budget=50))
    assert [s.job_id for s in result.starts] == ["j0", "j1"] and list(result.hold) == ["j2"]


def test_a_job_with_no_wall_time_is_held_saying_how_to_bound_its_cost():
    # its cap is unbounded, over any budget: "+ unbounded for this job = unbounded" told no one what to do
    result = plan(priced(pending("a", team="vision"), budget=1e9))
    assert result.hold["a"] == ("team vision has a budget ($1,000,000,000.00 a month) and this job has no wall "
                                "time, so its cost has no bound: give it one (gqa update a --time 4h)")
    assert plan(priced(pending("a", team="vision", max_gpu_hours=2.0))).hold == {}    # bounded another way


def test_a_held_job_is_released_when_it_fits_again():
    job = pending("a", team="vision", wall_time=3600, held=True)
    assert plan(priced(job, spend=0)).release == ["a"]
    assert plan(priced(job, spend=99)).release == []


def test_a_held_job_the_budget_allows_again_is_not_said_to_be_back_in_the_queue():
    # it is HELD until the release is written: "back in the queue" contradicted its state
    job = pending("a", team="vision", wall_time=3600, held=True)
    assert plan(priced(job, spend=0)).waiting["a"] == \
        "its team's budget allows it again: released at the queue's next pass"


def test_unbounded_cost_says_what_to_give_a_job_its_team_s_budget_cannot_count():
    assert unbounded_cost("nlp", 100.0, gpus=1, wall_time=None, max_gpu_hours=None, price=2.0) == \
        "team nlp has a budget ($100.00 a month): give the job a wall time (--time 4h) so its cost can be bounded"
    assert unbounded_cost("nlp", 100.0, gpus=1, wall_time=4 * HOUR, max_gpu_hours=None, price=2.0) is None
    assert unbounded_cost("nlp", 100.0, gpus=1, wall_time=None, max_gpu_hours=8.0, price=2.0) is None
    assert unbounded_cost("nlp", 100.0, gpus=1, wall_time=None, max_gpu_hours=None, price=0.0) is None   # free
    assert unbounded_cost("nlp", 100.0, gpus=0, wall_time=None, max_gpu_hours=None, price=2.0) is None   # CPU only


def test_a_pass_releases_only_the_held_jobs_the_budget_could_start():
    # $5 left, $2 a job: two released; released one by one against the same headroom, all five
    # were, and the pass after held three of them again: the whole queue flipped at every crossing
    jobs = [pending(f"h{i}", team="vision", wall_time=3600, held=True, seq=i, submitted_at=i) for i in range(5)]
    result = plan(priced(*jobs, spend=95))
    assert result.release == ["h0", "h1"] and result.starts == [] and result.hold == {}


def test_teams_without_a_budget_are_not_checked():
    assert [s.job_id for s in plan(priced(pending("a", team="nlp"))).starts] == ["a"]


@pytest.mark.parametrize("gpus, wall, cap, hours",
                         [(2, 3600, None, 2.0), (4, 7200, 3.0, 3.0), (1, None, None, float("inf"))])
def test_gpu_hours_cap(gpus, wall, cap, hours):
    assert gpu_hours_cap(gpus, wall, cap) == hours


def test_price_is_the_dearest_usable_gpu():
    inventory = (Gpu(0, "a10g", 1.0), Gpu(1, "h100", 4.0))
    assert price_for(None, inventory) == 4.0 and price_for("a10g", inventory) == 1.0


@pytest.mark.parametrize("policy, args, expected", [
    (Policy(approval_gpus=8), dict(gpus=16, gpu_hours=1, cost=0), ["asks for 16 GPUs (approval needed over 8)"]),
    (Policy(approval_gpu_hours=100), dict(gpus=1, gpu_hours=float("inf"), cost=0),
     ["unbounded GPU-hours (no wall time or max_gpu_hours) (approval needed over 100)"]),
    (Policy(approval_cost=500), dict(gpus=1, gpu_hours=1, cost=812.5),
     ["may cost $812.50 (approval needed over $500.00)"]),
    (Policy(approval_gpus=8, approval_cost=500), dict(gpus=8, gpu_hours=1, cost=500), []),
])
def test_approval_thresholds(policy, args, expected):
    assert approval_reasons(policy=policy, **args) == expected


def test_period_is_the_calendar_month_in_utc():
    assert period_of(1796000000.0) == "2026-11"


@pytest.mark.parametrize("spent, budget, text", [
    (5.0, None, "-"),
    (0.0, 100.0, "0%"),
    (0.0, 0.0, "0%"),              # a $0 budget: nothing spent has reached it
    (0.01, 0.0, "over 100%"),      # ...any spend is past it
    (23.176, 1.0, "2317%"),        # rounded down, never up
    (99.999, 100.0, "99%"),
    (100.0, 100.0, "100%"),
])
def test_a_budget_used_reads_one_way_in_a_holds_reason_and_in_the_views(spent, budget, text):
    assert used_text(spent, budget) == text
    if budget is not None:
        assert spent_text(TeamSpend("vision", spent, 0.0, budget)).endswith(f"this month ({text})")
