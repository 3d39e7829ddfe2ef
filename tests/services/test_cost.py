"""CostService: a month's spend per team (finished attempts from the ledger,
running ones so far in the current month) against the team's budget."""

import pytest

from gqa.models.errors import SpecError
from gqa.models.job import JobState as S
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu
from gqa.scheduling.budget import period_of
from gqa.services.cost import CostService, TeamCost, check_period
from gqa.services.quota import QuotaService
from gqa.services.snapshot import read_snapshot

PRICE = 2.0   # per GPU-hour


@pytest.fixture
def priced(queue):
    queue.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(4))))
    QuotaService(queue.store).set("vision", budget=100.0)
    return queue


def spend_some(queue):
    """vision: a 2-GPU job ran 30 min and ended ($2), a 1-GPU job runs for an hour now ($2);
    nlp: a 1-GPU job ran an hour and ended ($2)."""
    # a budgeted team's jobs need a cap (wall time) to be let in
    done = queue.start(team="vision", resources={"gpus": 2}, limits={"wall_time": "2h"})
    queue.clock.advance(1800)
    queue.exit(done.id, 0)
    queue.start(team="vision", resources={"gpus": 1}, limits={"wall_time": "2h"})
    other = queue.start(team="nlp", resources={"gpus": 1})
    queue.clock.advance(3600)
    queue.exit(other.id, 0)


def test_this_months_spend_counts_running_jobs_so_far_against_the_budget(priced):
    spend_some(priced)
    report = CostService(priced.store, priced.clock).report()
    assert report.period == period_of(priced.clock.now()) and report.current
    assert report.teams == [TeamCost("nlp", 2.0, 0.0, None), TeamCost("vision", 2.0, 2.0, 100.0)]
    assert report.teams[1].total == 4.0 and report.teams[1].used == pytest.approx(0.04)
    assert report.teams[0].used is None and report.total == 6.0


def test_another_month_has_no_running_share_and_teams_with_budgets_show_zero(priced):
    spend_some(priced)                                            # in January 1970
    report = CostService(priced.store, priced.clock).report(period="1970-02")
    assert not report.current
    assert report.teams == [TeamCost("vision", 0.0, 0.0, 100.0)]


def test_one_team(priced):
    spend_some(priced)
    service = CostService(priced.store, priced.clock)
    assert service.report(team="nlp").teams == [TeamCost("nlp", 2.0, 0.0, None)]
    assert service.report(team="ghost").teams == [TeamCost("ghost", 0.0, 0.0, None)]


@pytest.mark.parametrize("budget, total, used", [(100.0, 150.0, 1.5), (0.0, 0.0, 0.0), (0.0, 1.0, float("inf"))])
def test_used_is_the_fraction_of_the_budget(budget, total, used):
    assert TeamCost("t", total, 0.0, budget).used == used


NOW = 1_796_000_000.0    # 2026-11-30


@pytest.mark.parametrize("period", ["2026-13", "2026-1", "november", "2026-11-01", ""])
def test_a_period_is_a_calendar_month(period):
    with pytest.raises(SpecError, match="use a calendar month, e.g. 2026-11"):
        check_period(period, NOW)


@pytest.mark.parametrize("period, taken", [
    ("1970-01", True), ("2026-11", True), (" 2027-12 ", True),      # to the month a year from now is in
    ("1969-12", False), ("0000-01", False), ("0001-01", False), ("2028-01", False), ("9999-12", False),
])
def test_a_period_is_a_month_from_1970_to_a_year_from_now(period, taken):
    if taken:
        assert check_period(period, NOW) == period.strip()
        return
    with pytest.raises(SpecError) as refused:
        check_period(period, NOW)
    assert str(refused.value) == (f"period {period.strip()!r} is outside 1970-01 to 2027-12 (1970 to a year from "
                                  "now): give a month in between")


@pytest.mark.parametrize("period", ["9999-12", "0000-01"])
def test_a_month_the_calendar_cannot_hold_is_refused_not_a_crash(priced, period):
    with pytest.raises(SpecError, match=f"period '{period}' is outside 1970-01 to "):
        with_history(priced).report(period=period, gpu_hours=True, jobs=5)


def test_a_job_claimed_again_costs_nothing_until_its_new_attempt_starts(priced):
    """A requeued job that the scheduler claims again (STARTING) still has its
    previous attempt's started_at on the record: spend must not count the time
    since then (nor since 0 for a first attempt) as if it ran."""
    job = priced.start(team="vision", resources={"gpus": 2}, limits={"wall_time": "2h"})
    priced.clock.advance(1800)                                 # ran 30 min on 2 GPUs: $2
    priced.control.requeue([job.id])
    priced.supervisor.carry_out_requests()
    priced.exit(job.id, None, 15)                              # requeued: back in the queue, its $2 settled
    priced.clock.advance(3 * 3600)
    priced.supervisor.promote_retries()
    now = priced.clock.now()
    priced.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0,1", now, {"assigned": (0, 1)})])
    fresh = priced.submit_one(team="vision", limits={"wall_time": "1h"})   # a budget needs a bound
    priced.store.apply([Change(fresh.id, S.QUEUED, S.STARTING, "assigned GPUs 2", now, {"assigned": (2,)})])

    assert priced.get(job.id).started_at is not None           # the stale start the record keeps
    assert read_snapshot(priced.store, now).spend == {"vision": pytest.approx(2.0)}
    assert CostService(priced.store, priced.clock).report(team="vision").teams == [
        TeamCost("vision", pytest.approx(2.0), 0.0, 100.0)]


def test_an_attempt_not_started_yet_begins_now_in_the_snapshot(priced):
    """Backfill reserves GPUs until a running job's wall-time end, ETAs count from
    its start and preemption weighs the work it would lose: for a STARTING job
    the record's start is the previous attempt's, so the snapshot moves it to now."""
    job = priced.start(team="vision", resources={"gpus": 2}, limits={"wall_time": "2h"})
    priced.clock.advance(1800)
    priced.control.requeue([job.id])
    priced.supervisor.carry_out_requests()
    priced.exit(job.id, None, 15)
    priced.clock.advance(3 * 3600)
    priced.supervisor.promote_retries()
    now = priced.clock.now()
    priced.store.apply([Change(job.id, S.QUEUED, S.STARTING, "assigned GPUs 0,1", now, {"assigned": (0, 1)})])

    [run] = read_snapshot(priced.store, now).running
    assert (run.started, run.started_at, run.ends_by) == (False, now, now + 2 * 3600)


def with_history(queue) -> CostService:
    return CostService(queue.store, queue.clock, history=queue.store)


def test_gpu_hours_per_team_and_the_costliest_jobs_come_from_the_jobs_that_ran(priced):
    spend_some(priced)
    free = priced.start(team="free", resources={"gpus": 0, "cpus": 1})   # no GPU: no GPU-hours, not listed
    priced.exit(free.id, 0)
    priced.clock.advance(1800)                                   # the running vision job: 1.5 h, $3 so far
    report = with_history(priced).report(gpu_hours=True, jobs=2)
    assert report.gpu_hours == {"nlp": 1.0, "vision": 2.5}       # 2 GPUs x 30 min ended + 1 GPU x 1.5 h running
    assert [(j.team, j.gpus, round(j.gpu_hours, 3), round(j.cost, 3), j.status) for j in report.jobs] == [
        ("vision", 1, 1.5, 3.0, "running"), ("nlp", 1, 1.0, 2.0, "completed")]
    assert with_history(priced).report().gpu_hours == {}          # not asked: no history read
    assert [j.cost for j in with_history(priced).report(team="vision", jobs=5).jobs] == [3.0, 2.0]
    assert CostService(priced.store, priced.clock).report(gpu_hours=True, jobs=5).jobs == []   # no history: spend only


def test_a_month_counts_the_jobs_that_ended_in_it(priced):
    spend_some(priced)
    this = period_of(priced.clock.now())
    assert with_history(priced).report(period="1970-02", gpu_hours=True).gpu_hours == {"vision": 0.0}
    assert with_history(priced).report(period=this, gpu_hours=True).gpu_hours["vision"] == 2.0


@pytest.mark.parametrize("jobs", [-1, 1001])
def test_jobs_asked_for_are_bounded(priced, jobs):
    with pytest.raises(SpecError, match="costliest"):
        CostService(priced.store, priced.clock, priced.store).report(jobs=jobs)


def test_history_counts_a_running_jobs_money_so_far_as_cost_does(priced):
    """gqa history and gqa report read the history's summaries: a running job's cost there is its GPUs'
    price to now, the same money gqa cost counts for it (it was what its ended attempts cost: $0)."""
    from gqa.ports import HistoryQuery
    from gqa.services.history import HistoryService

    spend_some(priced)
    query = HistoryQuery(since=0.0, states=frozenset({S.RUNNING, S.SUCCEEDED}))
    rows = {r.state: r for r in HistoryService(priced.store, priced.clock, priced.store.inventory).list(query).rows}
    assert rows[S.RUNNING].cost == pytest.approx(2.0) and rows[S.RUNNING].gpu_hours == pytest.approx(1.0)
    unpriced = HistoryService(priced.store, priced.clock).list(query).rows    # no prices given: what has ended
    assert next(r for r in unpriced if r.state == S.RUNNING).cost == 0.0


def test_a_job_on_gpus_the_queue_no_longer_lists_costs_what_its_gpus_cost(priced):
    """A daemon restarted with fewer GPUs adopts the jobs running on the others: they still cost
    money while they run there. Spend so far (budgets and their stop), the costliest jobs and the
    settlement all price them alike (as the dearest GPU listed, here $2), never at $0."""
    kept = priced.start(team="vision", resources={"gpus": 2}, limits={"wall_time": "2h"})
    gone = priced.start(team="vision", resources={"gpus": 2}, limits={"wall_time": "2h"})
    assert (kept.assigned, gone.assigned) == ((0, 1), (2, 3))
    priced.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g", PRICE) for i in range(2))))
    priced.clock.advance(1800)                                   # each: 2 GPUs x 30 min = $2
    now = priced.clock.now()
    assert read_snapshot(priced.store, now).spend == {"vision": pytest.approx(4.0)}
    report = with_history(priced).report(team="vision", jobs=5)
    assert report.teams == [TeamCost("vision", 0.0, pytest.approx(4.0), 100.0)]
    assert sorted((j.id, round(j.cost, 3)) for j in report.jobs) == [(kept.id, 2.0), (gone.id, 2.0)]
    priced.exit(gone.id, 0)
    assert priced.get(gone.id).cost == pytest.approx(2.0)
    assert CostService(priced.store, priced.clock).report(team="vision").teams == [
        TeamCost("vision", pytest.approx(2.0), pytest.approx(2.0), 100.0)]
