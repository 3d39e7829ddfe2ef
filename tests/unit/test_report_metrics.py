"""What a report counts, from JobSummary rows: each section's rule on small tables of jobs."""

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from gqa.models.accounting import JobSummary
from gqa.models.job import JobState
from gqa.reporting.metrics import (PoolSpec, ReportInput, bucket_step, build, idle_jobs, in_period, month_share,
                                   outcomes, pool_of, pool_use, run_spans, team_use, tier_waits, wait_reasons)
from gqa.scheduling import Gpu
from gqa.reporting import pools_of

S = JobState
H = 3600.0
BASE = JobSummary(
    id="1", group="1", array_index=None, name="train", team="vision", owner="ann", tier=1, state=S.SUCCEEDED,
    gpus=1, gpu_type=None, submitted_at=0.0, first_start=0.0, ended_at=H, elapsed=H, wait=0.0, gpu_hours=1.0,
    cost=0.0, attempts=1, error_retries=0, reclaims=0, interruptions=0, exit_code=0, signal=None, reason="",
    wall_time=None, gpu_util=None, gpu_memory=None)


def job(id="1", **fields) -> JobSummary:
    return replace(BASE, id=id, **fields)


def ran(id, submitted, start, end, **fields) -> JobSummary:
    """A job that waited from `submitted` to `start` and ran once until `end`."""
    fields.setdefault("gpus", 1)
    return job(id, submitted_at=submitted, first_start=start, ended_at=end, elapsed=end - start,
               wait=start - submitted, gpu_hours=fields["gpus"] * (end - start) / H, **fields)


@pytest.mark.parametrize("row, inside", [
    (ran("1", 0, 10, 20), True),                       # all of it in the period
    (ran("1", -50, -40, 5), True),                     # ended in it
    (ran("1", -50, -40, -1), False),                   # ended before it
    (ran("1", 100, 110, 120), False),                  # submitted at its end: the next period's
    (job(state=S.QUEUED, first_start=None, ended_at=None, submitted_at=-500), True),   # still waiting
])
def test_a_job_is_in_the_period_it_waited_ran_or_ended_in(row, inside):
    assert in_period(row, 0, 100) is inside


@pytest.mark.parametrize("span, step", [(40, 1), (120, 5), (3600, 60), (2 * 86400, 3600), (7 * 86400, 3 * 3600),
                                        (30 * 86400, 43200), (365 * 86400, 7 * 86400)])
def test_buckets_are_a_round_step_cutting_the_period_into_at_most_60(span, step):
    assert bucket_step(span) == step


def test_waits_per_tier_by_the_bucket_the_job_started_in():
    rows = [ran("1", 0, 100, 200, tier=0), ran("2", 0, 300, 400, tier=0), ran("3", 3600, 3700, 3800, tier=0),
            ran("4", 0, 1000, 2000, tier=2), job("5", tier=2, state=S.QUEUED, first_start=None, ended_at=None,
                                                  wait=500.0)]
    waits = {w.tier: w for w in tier_waits(rows, (0.0, 3600.0), 3600.0, now=7200)}
    assert set(waits) == {"high", "low"}                 # a tier with no jobs is left out
    high = waits["high"]
    assert high.started == (2, 1)
    assert high.p50 == (200.0, 100.0) and high.p95 == pytest.approx((290.0, 100.0))
    assert (high.total_started, high.overall_p50, high.longest, high.waiting) == (3, 100.0, 300.0, 0)
    assert (waits["low"].total_started, waits["low"].waiting, waits["low"].p50) == (1, 1, (1000.0, None))


RUNNING = {"state": S.RUNNING, "ended_at": None}


@pytest.mark.parametrize("row, started", [
    (ran("1", -20, -10, 200), 0),                        # started before the period: its wait was before it
    (job("1", submitted_at=-20.0, first_start=-10.0, wait=10.0, elapsed=15.0, **RUNNING), 0),   # ...running on
    (ran("1", -20, 0, 200), 1),                          # started as the period began
    (ran("1", -20, 30, 200), 1),                         # waited from before it, started in it
    (ran("1", 10, 30, 50), 1),
    (job("1", submitted_at=90.0, first_start=100.0, wait=10.0, elapsed=5.0, **RUNNING), 0),   # at its end
    (job("1", submitted_at=90.0, first_start=None, wait=None, ended_at=None, state=S.QUEUED), 0),
])
def test_only_jobs_that_started_in_the_period_count_in_its_waits(row, started):
    """Period [0, 100): the starts, p50, p95 and longest wait are over the jobs that started in it, as the
    per-interval buckets are."""
    report = build(ReportInput([row], since=0, until=100, now=105))
    [waits] = report.waits
    assert (waits.total_started, sum(waits.started)) == (started, started)
    assert waits.overall_p50 == waits.overall_p95 == waits.longest == (row.wait if started else None)


@pytest.mark.parametrize("row, now, spans", [
    (ran("1", 0, 10, 110), 999, ((10, 110),)),
    # requeued, read without its transitions: 100 s over two attempts ending at 500 are drawn as the last 100 s
    (job(first_start=10.0, ended_at=500.0, elapsed=100.0), 999, ((400, 500),)),
    # ... and with them: each attempt where it ran
    (job(first_start=10.0, ended_at=500.0, elapsed=100.0, runs=((10.0, 60.0), (450.0, 500.0))), 999,
     ((10, 60), (450, 500))),
    (job(state=S.RUNNING, first_start=10.0, ended_at=None, elapsed=90.0), 100, ((10, 100),)),
    (job(state=S.QUEUED, first_start=None, ended_at=None, elapsed=0.0), 100, ()),
])
def test_a_jobs_runs_are_its_attempts_or_one_span_ending_at_its_end(row, now, spans):
    assert run_spans(row, now) == spans


def test_a_requeued_job_never_draws_a_pool_past_its_gpus():
    """Two GPUs; a job ran 0-100, was requeued, and ran again 300-400 while
    another job held the other GPU 0-300: never more than 2 GPUs at once."""
    pools = (PoolSpec("gpu", False, 2, 0.0),)
    rows = [job("1", first_start=0.0, ended_at=400.0, elapsed=200.0, runs=((0.0, 100.0), (300.0, 400.0))),
            ran("2", 0, 0, 300), ran("3", 0, 100, 300)]
    [use] = pool_use(rows, tuple(float(t) for t in range(0, 400, 50)), 50.0, pools, now=500)
    assert max(use.busy) == pytest.approx(2.0)
    assert use.gpu_hours == pytest.approx((200 + 300 + 200) / H)


POOLS = (PoolSpec("a100", False, 4, 4.0), PoolSpec("a100", True, 4, 1.5), PoolSpec("l4", False, 2, 0.8))


@pytest.mark.parametrize("row, pool", [
    (job(gpu_type="l4"), "l4 on demand"),                         # the only pool of its type
    (job(gpu_type="a100", gpu_hours=2.0, cost=3.0), "a100 spot"),  # paid 1.5 a GPU-hour: spot
    (job(gpu_type="a100", gpu_hours=2.0, cost=8.2), "a100 on demand"),
    (job(gpu_type="a100", gpu_hours=2.0, cost=0.0), "a100 on demand"),   # the price does not tell: the first
    (job(gpu_type="h100"), "h100"),                               # a type the inventory lacks
])
def test_a_finished_job_is_placed_in_a_pool_by_its_type_and_the_price_it_paid(row, pool):
    assert pool_of(row, POOLS) == pool


UNPRICED = (PoolSpec("a100", True, 4), PoolSpec("a100", False, 4), PoolSpec("l4", True, 2))


@pytest.mark.parametrize("row, pool", [
    (job(gpu_type="a100", gpu_hours=1.0, cost=1.0), "a100 on demand"),   # prices unknown: on demand...
    (job(gpu_type="a100", reclaims=1), "a100 spot"),                     # ...unless it was reclaimed
    (job(gpu_type="l4"), "l4 spot"),                                     # the only pool of its type
])
def test_where_prices_do_not_tell_a_reclaimed_job_ran_on_spot_and_others_on_demand(row, pool):
    assert pool_of(row, UNPRICED) == pool


def test_pools_of_the_inventory_in_order_with_their_price():
    gpus = (Gpu(0, "a100", 4.0), Gpu(1, "a100", 4.0), Gpu(2, "a100", 1.5, spot=True))
    assert pools_of(gpus) == (PoolSpec("a100", False, 2, 4.0), PoolSpec("a100", True, 1, 1.5))


def test_allocated_gpus_and_measured_utilisation_per_pool_and_bucket():
    pools = (PoolSpec("a100", False, 4, 0.0),)
    rows = [ran("1", 0, 0, 3600, gpus=2, gpu_type="a100", gpu_util=50.0),
            ran("2", 0, 1800, 5400, gpus=2, gpu_type="a100"),                 # not measured
            ran("3", 0, 0, 1800, gpus=1, gpu_type="l4", gpu_util=90.0)]       # a pool the inventory lacks
    use = {p.name: p for p in pool_use(rows, (0.0, 3600.0), 3600.0, pools, now=7200)}
    a100 = use["a100 on demand"]
    assert a100.busy == (3.0, 1.0)                  # 2 GPUs all hour + 2 GPUs half of it; then 2 for half
    assert a100.share == (0.75, 0.25) and a100.mean_share == 0.5
    assert a100.measured == (50.0, None)            # only job 1 was measured
    assert a100.gpu_hours == pytest.approx(4.0)
    assert (use["l4"].gpus, use["l4"].busy, use["l4"].share) == (None, (0.5, 0.0), (None, None))


def _ts(*date) -> float:
    return datetime(*date, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("since, until, months", [
    (_ts(2026, 11, 1), _ts(2026, 12, 1), 1.0),
    (_ts(2026, 11, 1), _ts(2026, 11, 16), 0.5),                     # half of November's 30 days
    (_ts(2026, 11, 16), _ts(2026, 12, 16, 12), 0.5 + 15.5 / 31),     # across a month's end
    (_ts(2026, 12, 1), _ts(2027, 1, 1), 1.0),                        # across a year's end
])
def test_a_period_spans_months_in_fractions_of_each(since, until, months):
    assert month_share(since, until) == pytest.approx(months)


def test_teams_spend_and_gpu_hours_against_their_budget_for_the_period():
    since, until = _ts(2026, 11, 1), _ts(2026, 11, 16)
    rows = [job("1", team="vision", gpu_hours=2.0, cost=30.0), job("2", team="vision", gpu_hours=1.0, cost=20.0),
            job("3", team="nlp", gpu_hours=5.0, cost=0.0)]
    teams = {t.team: t for t in team_use(rows, {"vision": 200.0, "speech": 100.0}, since, until)}
    assert list(teams) == ["nlp", "speech", "vision"]          # a team with a budget shows without jobs
    vision = teams["vision"]
    assert (vision.jobs, vision.gpu_hours, vision.cost, vision.budget, vision.used) == (2, 3.0, 50.0, 100.0, 0.5)
    assert (teams["nlp"].budget, teams["nlp"].used) == (None, None)
    assert teams["speech"].jobs == 0 and teams["speech"].cost == 0.0
    # a simulated trace has no calendar: no budgets
    assert [t.budget for t in team_use(rows, {"vision": 200.0}, 0, 100, relative=True)] == [None, None]


def test_outcomes_count_ends_and_what_happened_on_the_way():
    rows = [job("1"), job("2", state=S.FAILED, error_retries=2), job("3", state=S.TIMED_OUT, reclaims=1),
            job("4", state=S.CANCELLED), job("5", state=S.RUNNING, ended_at=None), job("6", error_retries=1)]
    assert dict(outcomes(rows)) == {"succeeded": 2, "failed": 1, "timed out": 1, "cancelled": 1, "rejected": 0,
                                    "retried after an error": 2, "reclaimed (spot)": 1, "running or waiting": 1}


def test_reasons_jobs_waited_most_time_first_with_the_longest_and_not_a_moments_launch():
    rows = [job("1", waited=(("awaiting approval", 600.0), ("GPUs or quota", 60.0))),
            job("2", waited=(("GPUs or quota", 300.0),)),
            job("3", waited=(("held by its team's budget", 100.0), ("launch (on AWS: an instance)", 0.02))),
            job("4", waited=(("launch (on AWS: an instance)", 0.03),)), job("5")]
    reasons = wait_reasons(rows)
    assert [(r.why, r.jobs, r.seconds, r.longest, r.longest_job) for r in reasons] == [
        ("awaiting approval", 1, 600.0, 600.0, "1"), ("GPUs or quota", 2, 360.0, 300.0, "2"),
        ("held by its team's budget", 1, 100.0, 100.0, "3")]
    assert reasons[1].mean == 180.0


def test_idle_jobs_under_the_threshold_most_waste_first():
    rows = [job("1", gpu_util=10.0, gpu_hours=4.0), job("2", gpu_util=5.0, gpu_hours=1.0),
            job("3", gpu_util=60.0, gpu_hours=9.0), job("4", gpu_util=None, gpu_hours=9.0),
            job("5", gpu_util=0.0, gpu_hours=0.0)]
    idle = idle_jobs(rows)
    assert [(j.id, j.wasted) for j in idle] == [("1", pytest.approx(3.6)), ("2", pytest.approx(0.95))]


def test_build_counts_only_the_periods_jobs_and_refuses_an_empty_period():
    rows = [ran("1", 0, 10, 20, gpu_util=5.0), ran("2", -100, -90, -50), job("3", state=S.QUEUED, first_start=None,
                                                                                ended_at=None, submitted_at=50.0)]
    report = build(ReportInput(rows, since=0, until=3600, now=3600))
    assert report.jobs == 2 and report.step == 60 and len(report.times) == 60
    assert report.idle_jobs == report.measured_jobs == 1 and report.wasted_gpu_hours == pytest.approx(10 / 3600 * 0.95)
    with pytest.raises(ValueError):
        build(ReportInput(rows, since=10, until=10, now=10))
