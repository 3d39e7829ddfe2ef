"""`--estimates`: the wall times users ask for, per mode: their shares, who is
killed at the limit, and the same values for a prefix as for the whole trace."""

import pytest

from gqa.sim.estimates import (
    DAY, FITTED_KILLED_SHARE, FITTED_MAX_SHARE, FITTED_REQUESTS, FITTED_STEPS, HOUR, PARTITION_DEFAULT, PARTITION_MAX,
    Estimates, EstimatesError, wall_time, wall_time_for,
)
from gqa.sim.trace import TraceJob
from gqa.sim.workload import derive

DRAWS = 10_000


def needs(n: int, low: float = 2 * HOUR, high: float = 2 * DAY) -> list[float]:
    """Durations spread over [low, high): long enough to under-ask a round value, short enough for any limit."""
    return [low + (high - low) * ((i * 7919) % n) / n for i in range(n)]


def asked(mode: str, durations: list[float], seed: int = 0, **kw) -> list[tuple[float, float]]:
    estimates = Estimates(mode, **kw)
    return [(d, wall_time(d, f"job{i}", seed, estimates)) for i, d in enumerate(durations)]


def share(pairs, test) -> float:
    return sum(1 for d, a in pairs if test(d, a)) / len(pairs)


def test_model_mode_is_todays_wall_time():
    durations = needs(500, 60, 10 * DAY)
    assert [a for _, a in asked("model", durations, seed=5)] == [wall_time_for(d, f"job{i}", 5)
                                                                for i, d in enumerate(durations)]


@pytest.mark.parametrize("given", [0.0, 0.4, 0.75])
def test_default_mode_asks_the_default_at_its_share_and_the_rest_by_the_model(given):
    durations = needs(DRAWS)
    pairs = asked("default", durations, default_share=given)
    at_default = {i for i, (_, a) in enumerate(pairs) if a == PARTITION_DEFAULT}
    model = [wall_time_for(d, f"job{i}", 0) for i, d in enumerate(durations)]
    # the model sometimes rounds up to a day by itself: count the jobs whose own estimate was not one
    chosen = [i for i in at_default if model[i] != PARTITION_DEFAULT]
    others = sum(1 for m in model if m != PARTITION_DEFAULT)
    assert abs(len(chosen) / others - given) < 0.015
    assert all(a == model[i] for i, (_, a) in enumerate(pairs) if i not in at_default)
    killed = share(pairs, lambda d, a: a < d)
    assert killed == share(pairs, lambda d, a: a == PARTITION_DEFAULT and d > PARTITION_DEFAULT)
    assert given == 0 or killed > 0


def test_max_mode_asks_the_maximum_and_kills_only_what_needs_more():
    pairs = asked("max", [HOUR, 6 * DAY, 7 * DAY, 8 * DAY, 18 * DAY])
    assert {a for _, a in pairs} == {PARTITION_MAX}
    assert [a < d for d, a in pairs] == [False, False, False, True, True]


def test_fitted_mode_reproduces_its_stated_shares():
    pairs = asked("fitted", needs(DRAWS, 2 * HOUR, 12 * HOUR))  # where the rest's tail never reaches 7d
    killed = share(pairs, lambda d, a: a < d)
    assert abs(killed - FITTED_KILLED_SHARE) < 0.015
    assert abs(share(pairs, lambda d, a: a == PARTITION_MAX) - FITTED_MAX_SHARE) < 0.005
    # under-askers ask a round value the log's users typed; the rest at least what they need, 7d at most
    assert all(a in FITTED_STEPS for d, a in pairs if a < d)
    assert all(a <= PARTITION_MAX for _, a in pairs)
    assert all(a in FITTED_STEPS or a % DAY == 0 for _, a in pairs)


def test_fitted_jobs_of_a_few_minutes_ask_the_commonest_requests_as_often_as_the_log():
    pairs = asked("fitted", [300.0] * DRAWS)
    finished = [a for d, a in pairs if d <= a < PARTITION_MAX]
    total = sum(w for _, w in FITTED_REQUESTS)
    for value, weight in FITTED_REQUESTS:
        assert abs(finished.count(value) / len(finished) - weight / total) < 0.015, value


def test_fitted_under_askers_shorter_than_every_round_value_ask_half():
    short = min(FITTED_STEPS) / 2
    pairs = asked("fitted", [short] * 2000)
    killed = [a for d, a in pairs if a < d]
    assert killed and set(killed) == {short / 2}


@pytest.mark.parametrize("mode", ["model", "default", "max", "fitted"])
def test_deterministic_per_seed_and_job_so_a_prefix_gets_the_same_values(mode):
    trace = [TraceJob(id=f"j{i}", submit_time=10.0 * i, duration=float(60 + 997 * i % 200000), gpus=1)
             for i in range(400)]
    whole = derive(trace, cluster_gpus=8, seed=3, estimates=Estimates(mode))
    prefix = derive(trace, cluster_gpus=8, seed=3, limit=100, estimates=Estimates(mode))
    again = derive(trace, cluster_gpus=8, seed=3, estimates=Estimates(mode))
    walls = [j.wall_time for j in whole.jobs]
    assert walls[:100] == [j.wall_time for j in prefix.jobs]
    assert walls == [j.wall_time for j in again.jobs]
    if mode != "max":
        other = derive(trace, cluster_gpus=8, seed=4, estimates=Estimates(mode))
        assert walls != [j.wall_time for j in other.jobs]


@pytest.mark.parametrize("mode, words", [
    ("model", ["lognormal over-estimate", "median 2.5x"]),
    ("default", ["40% of jobs", "partition default, 1d", "killed at their limit"]),
    ("max", ["partition maximum, 7d", "killed at their limit"]),
    ("fitted", ["ALCF Theta 2022", "26.2% under-ask", "1.5% ask the partition maximum 7d", "median 1.34x"]),
])
def test_each_mode_is_one_assumption_line_with_its_numbers(mode, words):
    trace = [TraceJob(id=f"j{i}", submit_time=i, duration=float(600 + 3001 * i % 900000), gpus=1) for i in range(300)]
    said = derive(trace, cluster_gpus=8, estimates=Estimates(mode)).assumptions
    lines = [s for s in said if s.startswith("wall time")]
    assert len(lines) == 1
    assert all(w in lines[0] for w in words), lines[0]


def test_a_given_wall_time_is_kept_whatever_the_mode():
    work = derive([TraceJob("x", 0, 600, 1, wall_time=300)], cluster_gpus=1, estimates=Estimates("max"))
    assert work.jobs[0].wall_time == 300
    assert not any(s.startswith("wall time") for s in work.assumptions)


@pytest.mark.parametrize("mode, share, message", [
    ("oracle", 0.4, "unknown estimates mode 'oracle'; choose from model, default, max, fitted"),
    ("default", 1.5, "between 0 and 1, not 1.5"),
])
def test_bad_mode_or_share_is_refused(mode, share, message):
    with pytest.raises(EstimatesError, match=message):
        Estimates(mode, share)
