"""The budget watch's rules: thresholds, holds, releases, stops, pending and idle alerts."""

import pytest

from gqa.scheduling import Gpu, TeamPolicy, plan
from gqa.scheduling.alerts import (Attempt, Waiting, budget_alerts, budget_key, idle_alerts, idle_key, pending_alerts,
                                   pending_key, queue_changes, team_spend, unsent)
from gqa.scheduling.budget import TeamSpend, percent_text, spent_text
from tests.builders import pending, running, snapshot

NOW = snapshot().now
PERIOD = "2026-11"
THRESHOLDS = (50.0, 80.0, 100.0)
PRICED = tuple(Gpu(i, "a10g", price=2.0) for i in range(4))   # $2 per GPU-hour


def spend_of(spent: float, budget: float | None = 1000.0, team: str = "vision") -> dict[str, TeamSpend]:
    return {team: TeamSpend(team, spent, 0.0, budget)}


@pytest.mark.parametrize("spent, budget, sent, expected", [
    (400, 1000, set(), []),                              # under every threshold
    (500, 1000, set(), [50]),                            # exactly at one
    (850, 1000, set(), [80]),                            # a jump over two: one alert, the highest
    (850, 1000, {50}, [80]),
    (850, 1000, {80}, []),                               # already sent this period
    (1200, 1000, {50, 80}, [100]),
    (700, 1000, {100}, []),                              # budget raised after 100%: a higher one went out
    (0, 0, set(), []),                                   # a zero budget, nothing spent
    (5, 0, set(), [100]),                                # a zero budget, any spend
    (900, None, set(), []),                              # no budget, no alerts
], ids=["under", "at-50", "jump", "after-50", "sent", "over", "raised", "zero-none", "zero-some", "no-budget"])
def test_threshold_alerts_once_per_team_threshold_and_period(spent, budget, sent, expected):
    alerts = unsent(budget_alerts(spend_of(spent, budget), THRESHOLDS, PERIOD),
                    {budget_key(PERIOD, "vision", t) for t in sent})
    assert [a.key for a in alerts] == [budget_key(PERIOD, "vision", t) for t in expected]


def test_a_threshold_alert_says_the_numbers_and_the_hold():
    [alert] = budget_alerts({"vision": TeamSpend("vision", 900.0, 112.0, 1000.0)}, THRESHOLDS, PERIOD)
    assert alert.subject == "gqa: team vision at 101% of its 2026-11 budget"
    assert alert.message == ("team vision spent $1,012.00 of $1,000.00 this month (101%): $900.00 by finished "
                             "attempts, $112.00 by running jobs so far. Alert threshold 100%. Its queue is held "
                             "until the budget is raised or the month ends.")
    assert (alert.kind, alert.team) == ("budget", "vision")


def test_thresholds_are_configurable():
    alerts = budget_alerts(spend_of(950), (90.0, 25.0), PERIOD)
    assert [a.key for a in alerts] == [budget_key(PERIOD, "vision", 90)]


@pytest.mark.parametrize("percent, text", [(99.99, "99%"), (100.0, "100%"), (101.2, "101%"),
                                           (float("inf"), "over 100%")])
def test_percent_is_rounded_down(percent, text):
    assert percent_text(percent) == text


def test_team_spend_adds_settled_and_running_and_keeps_budgets():
    spend = team_spend({"vision": 10.0}, {"vision": 2.5, "nlp": 1.0}, {"audio": TeamPolicy(budget=5)},
                       TeamPolicy(budget=100))
    assert spend == {"audio": TeamSpend("audio", 0.0, 0.0, 5), "nlp": TeamSpend("nlp", 0.0, 1.0, 100),
                     "vision": TeamSpend("vision", 10.0, 2.5, 100)}


# -- holds, releases and stops ----------------------------------------------------------------

def watched(*jobs, run=(), spent=1012.0, budget=1000.0, stop=False):
    teams = {"vision": TeamPolicy(budget=budget, stop_at_budget=stop)}
    return snapshot(PRICED, pending=list(jobs), running=list(run), teams=teams, spend={"vision": spent})


def attempt(job_id, team="vision", requested=False):
    return Attempt(job_id, team, "train", 1, NOW - 60, 1, requested=requested)


def test_an_exhausted_team_has_its_queue_held_with_the_numbers():
    snap = watched(pending("q", team="vision"), pending("other", team="nlp"))
    changes = queue_changes(snap, spend_of(1012.0), [])
    assert changes.hold == {"q": "team vision spent $1,012.00 of $1,000.00 this month (101%)"}
    assert changes.release == [] and changes.stop == {}


@pytest.mark.parametrize("spent, budget, wall, released", [
    (1012.0, 1000.0, 3600, False),      # still at the budget
    (1012.0, 2000.0, 3600, True),       # budget raised
    (0.0, 1000.0, 3600, True),          # a new month: nothing spent yet
    (1990.0, 2000.0, 3600 * 10, False), # raised, but this job's cap ($20) does not fit: the pass would hold it
])
def test_held_jobs_are_released_only_when_the_pass_would_not_hold_them_again(spent, budget, wall, released):
    snap = watched(pending("h", team="vision", held=True, wall_time=wall), spent=spent, budget=budget)
    assert queue_changes(snap, spend_of(spent, budget), []).release == (["h"] if released else [])


def test_the_watch_releases_only_the_held_jobs_the_budget_could_start():
    # $10 left, $4 a job (one hour of 2 GPUs at $2): two of five, as the pass counts them
    jobs = [pending(f"h{i}", team="vision", gpus=2, wall_time=3600, held=True, seq=i) for i in range(5)]
    snap = watched(*jobs, spent=1990.0, budget=2000.0)
    assert queue_changes(snap, spend_of(1990.0, 2000.0), []).release == ["h0", "h1"]


@pytest.mark.parametrize("stop, requested, stopped", [(True, False, True), (False, False, False),
                                                      (True, True, False)])
def test_running_jobs_are_requeued_only_where_the_team_says_so(stop, requested, stopped):
    snap = watched(run=[running("r", team="vision")], stop=stop)
    changes = queue_changes(snap, spend_of(1012.0), [attempt("r", requested=requested)])
    assert list(changes.stop) == (["r"] if stopped else [])
    if stopped:
        assert changes.stop["r"].startswith("team vision spent $1,012.00 of $1,000.00 this month (101%)")


def test_the_scheduling_pass_holds_an_exhausted_teams_free_jobs_too():
    free = (Gpu(0, "cpu-box", price=0.0),)
    snap = snapshot(free, pending=[pending("q", team="vision", gpus=1, wall_time=60)],
                    teams={"vision": {"budget": 10.0}}, spend={"vision": 10.0})
    result = plan(snap)
    assert result.starts == [] and result.hold["q"] == "team vision spent $10.00 of $10.00 this month (100%)"


def test_spent_text():
    assert spent_text(TeamSpend("vision", 1000.0, 12.0, 1000.0)) == \
        "team vision spent $1,012.00 of $1,000.00 this month (101%)"


# -- pending and idle --------------------------------------------------------------------------

@pytest.mark.parametrize("waited, after, alerted", [(4 * 3600, 4 * 3600, True), (4 * 3600 - 1, 4 * 3600, False),
                                                    (10 * 3600, None, False)])
def test_pending_too_long(waited, after, alerted):
    job = Waiting("12", "vision", "train", NOW - waited, "needs 4 GPUs of a10g, 2 free")
    alerts = pending_alerts([job], NOW, after)
    assert [a.key for a in alerts] == ([pending_key("12")] if alerted else [])
    if alerted:
        assert alerts[0].message == ("job 12 (train, team vision) has waited 4h00m, longer than 4h00m: "
                                     "needs 4 GPUs of a10g, 2 free")


@pytest.mark.parametrize("ran, used, alerted", [
    (3600, 2.0, True),      # under 5% over the window, running longer than it
    (3600, 5.0, False),     # at the threshold is not under it
    (1200, 0.0, False),     # not running for a whole window yet
    (3600, None, False),    # no figure: not called idle
])
def test_idle_gpus(ran, used, alerted):
    job = Attempt("7", "vision", "train", 2, NOW - ran, 4)
    utilisation = {} if used is None else {"7": used}
    alerts = idle_alerts([job], utilisation, NOW, below=5.0, window=1800)
    assert [a.key for a in alerts] == ([idle_key("7", 2)] if alerted else [])
    if alerted:
        assert alerts[0].message == ("job 7 (train, team vision, attempt 2) holds 4 GPUs averaging 2.0% "
                                     "utilisation over the last 30m00s (alert under 5%); it has run 1h00m")


def test_idle_alerts_are_per_attempt():
    assert idle_key("7", 1) != idle_key("7", 2)
    assert unsent(idle_alerts([Attempt("7", "v", "t", 2, NOW - 3600, 1)], {"7": 0.0}, NOW, below=5, window=60),
                  {idle_key("7", 1)}) != []


def test_the_budget_watch_never_releases_a_job_its_owner_holds():
    snap = watched(pending("h", team="vision", held=True, user_hold=True, wall_time=3600),
                   pending("b", team="vision", held=True, wall_time=3600), spent=0.0, budget=2000.0)
    assert queue_changes(snap, spend_of(0.0, 2000.0), []).release == ["b"]
