"""What backfill counts a job's run as (gqa.scheduling.horizon): its limit, or
with predictions its expected run time, lengthened each time it is outlived."""

import pytest

from gqa.scheduling import Policy
from gqa.scheduling.horizon import BACKFILL_BY, backfill_by_choice, busy_until, counted_run, doubled_past
from tests.builders import pending, running

LIMITS, PREDICTIONS = Policy(), Policy(backfill_by="predictions")
HOUR = 3600.0


@pytest.mark.parametrize("policy, wall, expected, counted", [
    (LIMITS, 10 * HOUR, 2 * HOUR, 10 * HOUR),
    (PREDICTIONS, 10 * HOUR, 2 * HOUR, 2 * HOUR),
    (PREDICTIONS, 10 * HOUR, 20 * HOUR, 10 * HOUR),   # never past the limit
    (PREDICTIONS, 10 * HOUR, None, 10 * HOUR),        # nothing to predict from: the limit
    (PREDICTIONS, 10 * HOUR, 0.0, 10 * HOUR),
    (PREDICTIONS, None, 2 * HOUR, 2 * HOUR),          # no limit, but a prediction
    (PREDICTIONS, None, None, None),
    (LIMITS, None, 2 * HOUR, None),
])
def test_counted_run_of_a_pending_job(policy, wall, expected, counted):
    assert counted_run(pending("p", wall_time=wall, expected_runtime=expected), policy) == counted


@pytest.mark.parametrize("policy, now, expected, started, until", [
    (LIMITS, 1 * HOUR, 2 * HOUR, True, 10 * HOUR),
    (PREDICTIONS, 1 * HOUR, 2 * HOUR, True, 2 * HOUR),
    (PREDICTIONS, 2 * HOUR, 2 * HOUR, True, 4 * HOUR),    # outlived at its predicted end: twice as long
    (PREDICTIONS, 5 * HOUR, 2 * HOUR, True, 8 * HOUR),    # and again
    (PREDICTIONS, 9 * HOUR, 2 * HOUR, True, 10 * HOUR),   # never past the limit
    (PREDICTIONS, 11 * HOUR, 2 * HOUR, True, 10 * HOUR),  # past it (being killed): the limit still
    (PREDICTIONS, 1 * HOUR, None, True, 10 * HOUR),
    (PREDICTIONS, 1 * HOUR, 2 * HOUR, False, 10 * HOUR),  # still starting: no run to predict from yet
])
def test_busy_until_of_a_running_job(policy, now, expected, started, until):
    run = running("r", started_at=0.0, wall_time=10 * HOUR, expected_runtime=expected, started=started)
    assert busy_until(run, policy, now) == until


def test_busy_until_moves_only_when_a_prediction_is_outlived():
    run = running("r", started_at=0.0, wall_time=100 * HOUR, expected_runtime=HOUR)
    ends = [busy_until(run, PREDICTIONS, t * HOUR / 4) for t in range(0, 40)]
    assert sorted(set(ends)) == [HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR, 16 * HOUR]
    assert all(end > t * HOUR / 4 for t, end in enumerate(ends))


@pytest.mark.parametrize("now, expected, limit_end, end", [
    (1 * HOUR, 2 * HOUR, 10 * HOUR, 2 * HOUR),      # not outlived
    (2 * HOUR, 2 * HOUR, 10 * HOUR, 4 * HOUR),      # ending now counts as outlived
    (5 * HOUR, 2 * HOUR, 10 * HOUR, 8 * HOUR),      # 2, 4, then 8
    (9 * HOUR, 2 * HOUR, 10 * HOUR, 10 * HOUR),     # 16 would pass the limit
    (12 * HOUR, 2 * HOUR, 10 * HOUR, 10 * HOUR),    # past the limit: the limit, however late
    (5 * HOUR, 2 * HOUR, float("inf"), 8 * HOUR),   # no limit: doubled all the same
])
def test_an_outlived_prediction_is_doubled_until_it_is_ahead(now, expected, limit_end, end):
    assert doubled_past(0.0, expected, now, limit_end) == end


def test_a_running_job_without_a_limit_is_predicted_all_the_same():
    run = running("r", started_at=0.0, expected_runtime=HOUR)
    assert busy_until(run, PREDICTIONS, 3 * HOUR) == 4 * HOUR
    assert busy_until(run, LIMITS, 3 * HOUR) == float("inf")


@pytest.mark.parametrize("text", BACKFILL_BY)
def test_backfill_by_choices(text):
    assert backfill_by_choice(text) == text


def test_an_unknown_backfill_by_says_what_there_is():
    with pytest.raises(ValueError, match="backfill counts run times by limits or predictions, not 'guesses'"):
        backfill_by_choice("guesses")
