"""CostService: a month's spend per team (finished attempts from the ledger,
running ones so far in the current month) against the team's budget."""

import pytest

from gqa.models.errors import SpecError
from gqa.ports import Inventory
from gqa.scheduling import Gpu
from gqa.scheduling.budget import period_of
from gqa.services.cost import CostService, TeamCost, check_period
from gqa.services.quota import QuotaService

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


def test_a_past_month_has_no_running_share_and_teams_with_budgets_show_zero(priced):
    spend_some(priced)
    report = CostService(priced.store, priced.clock).report(period="1969-12")
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


@pytest.mark.parametrize("period", ["2026-13", "2026-1", "november", "2026-11-01", ""])
def test_a_period_is_a_calendar_month(period):
    with pytest.raises(SpecError, match="use a calendar month, e.g. 2026-11"):
        check_period(period)
