"""What traces lack, derived: wall times, teams, users, load."""

import math

import pytest

from gqa.sim.trace import TraceJob
from gqa.sim.estimates import WALL_STEPS, wall_time_for
from gqa.sim.workload import DEFAULT_TEAMS, MIN_LOAD, derive


PUBLISHED_SEED_0 = [("team-a", "team-a-u6"), ("team-c", "team-c-u0"), ("team-a", "team-a-u3"),
                    ("team-a", "team-a-u2"), ("team-c", "team-c-u6"), ("team-b", "team-b-u5")]


def jobs(n: int, **fields) -> list[TraceJob]:
    return [TraceJob(id=f"j{i}", submit_time=100.0 + 10 * i, duration=float(60 + 997 * i % 50000),
                     gpus=1 + i % 4, **fields) for i in range(n)]


def test_wall_time_never_below_duration_and_a_typed_value():
    for i in range(2000):
        duration = 1.0 + (i * 7919) % 900000
        wall = wall_time_for(duration, f"job{i}", seed=3)
        assert wall >= duration
        assert wall in WALL_STEPS or (wall > WALL_STEPS[-1] and wall % 86400 == 0)


def test_wall_times_depend_on_the_seed_not_on_the_position():
    a = derive(jobs(300), cluster_gpus=8, seed=1)
    b = derive(jobs(300), cluster_gpus=8, seed=1)
    c = derive(jobs(300), cluster_gpus=8, seed=2)
    prefix = derive(jobs(300), cluster_gpus=8, seed=1, limit=50)
    walls = [j.wall_time for j in a.jobs]
    assert walls == [j.wall_time for j in b.jobs]
    assert walls != [j.wall_time for j in c.jobs]
    assert walls[:50] == [j.wall_time for j in prefix.jobs]


@pytest.mark.parametrize("load", [0.0, -1.0, MIN_LOAD / 2, 1e-300, math.inf, math.nan])
def test_a_load_outside_its_bounds_is_refused(load):
    with pytest.raises(ValueError, match=f"load must be a number from {MIN_LOAD:g}"):
        derive(jobs(3), cluster_gpus=8, load=load)


def test_the_slowest_load_stretches_the_gaps_100_fold():
    slow = derive(jobs(3), cluster_gpus=8, load=MIN_LOAD)
    plain = derive(jobs(3), cluster_gpus=8)
    assert [j.submit for j in slow.jobs] == [j.submit * 100 for j in plain.jobs]


def test_a_given_wall_time_is_kept():
    work = derive([TraceJob("x", 0, 600, 1, wall_time=300)], cluster_gpus=1)
    assert work.jobs[0].wall_time == 300  # shorter than the run: killed at its limit, as it would be


@pytest.mark.parametrize("seed", [0, 99])
def test_teams_by_hash_deterministic_and_roughly_weighted(seed):
    a = derive(jobs(4000), cluster_gpus=8, seed=seed)
    again = derive(jobs(4000), cluster_gpus=8, seed=seed)
    assert [(j.team, j.user) for j in a.jobs] == [(j.team, j.user) for j in again.jobs]
    for team, weight in DEFAULT_TEAMS:
        share = sum(j.team == team for j in a.jobs) / len(a.jobs)
        assert abs(share - weight) < 0.03, (team, share)
    assert all(j.user.startswith(j.team + "-u") for j in a.jobs)
    assert set(a.teams) == {t for t, _ in DEFAULT_TEAMS} and all(p.share == 1.0 for p in a.teams.values())
    assert f"teams (none in the trace): by a hash of the job id and seed {seed}: team-a 40%, team-b 30%, " \
           "team-c 20%, team-d 10%" in a.assumptions


def test_teams_and_users_move_with_the_seed_and_seed_0_draws_as_published():
    zero, other = derive(jobs(4000), cluster_gpus=8, seed=0), derive(jobs(4000), cluster_gpus=8, seed=5)
    moved = sum(a.team != b.team for a, b in zip(zero.jobs, other.jobs)) / 4000
    assert 0.5 < moved < 0.85     # about 1 - (0.4^2 + 0.3^2 + 0.2^2 + 0.1^2) = 0.7 draw another team
    assert [j.user for j in zero.jobs] != [j.user for j in other.jobs]
    # seed 0's draws, pinned: the README's tables were replayed on them
    assert [(j.team, j.user) for j in zero.jobs[:6]] == PUBLISHED_SEED_0


def test_given_team_user_priority_are_kept_and_shares_applied():
    work = derive([TraceJob("x", 0, 60, 1, team="nlp", user="bob", priority="high")], cluster_gpus=1,
                  shares={"nlp": 3.0, "vision": 1.0})
    job = work.jobs[0]
    assert (job.team, job.user, job.tier) == ("nlp", "bob", 0)
    assert work.teams["nlp"].share == 3.0 and work.teams["vision"].share == 1.0


def test_one_tier_puts_every_job_in_normal_and_says_what_the_trace_gave():
    trace = [TraceJob("a", 0, 60, 1, priority="high"), TraceJob("b", 1, 60, 1, priority="low"),
             TraceJob("c", 2, 60, 1, priority="low"), TraceJob("d", 3, 60, 1)]
    kept = derive(trace, cluster_gpus=1)
    one = derive(trace, cluster_gpus=1, priorities="one")
    assert [j.tier for j in kept.jobs] == [0, 2, 2, 1]
    assert [j.tier for j in one.jobs] == [1, 1, 1, 1]
    assert [(j.id, j.wall_time) for j in one.jobs] == [(j.id, j.wall_time) for j in kept.jobs]   # nothing else moves
    said = [line for line in one.assumptions if line.startswith("priority:")]
    assert said == ["priority: every job normal (--priorities one), though the trace gives 1 high, 2 low; "
                    "fifo, fifo-easy and las never read it"]
    assert "priority: normal where the trace gives none" in kept.assumptions


def test_an_unknown_priorities_choice_is_refused():
    with pytest.raises(ValueError, match="priorities must be one of trace, one, got 'flat'"):
        derive([TraceJob("a", 0, 60, 1)], cluster_gpus=1, priorities="flat")


def test_load_scales_arrivals_from_zero_and_oversize_jobs_are_dropped():
    trace = [TraceJob("a", 1000, 60, 1), TraceJob("b", 1100, 60, 16), TraceJob("c", 1300, 60, 2)]
    work = derive(trace, cluster_gpus=8, load=2.0)
    assert [(j.id, j.submit, j.seq) for j in work.jobs] == [("a", 0.0, 0), ("c", 150.0, 1)]
    assert any("dropped 1 job asking for more than 8 GPUs" in s for s in work.assumptions)
    assert any("load x2" in s for s in work.assumptions)


def test_repeated_ids_become_unique():
    work = derive([TraceJob("a", 0, 60, 1), TraceJob("a", 1, 60, 1)], cluster_gpus=1)
    assert len({j.id for j in work.jobs}) == 2
