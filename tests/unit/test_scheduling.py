"""gqa.scheduling.plan, one rule per table, and the hard limits checked at submit."""

import dataclasses

import pytest

from tests.builders import gpus, pending, running, snapshot
from gqa.scheduling import Policy, TeamPolicy, plan
from gqa.scheduling.limits import hard_limit_problems

GiB = 1024**3
DAY = 86400.0


def starts(snap) -> list[str]:
    return [s.job_id for s in plan(snap).starts]


def assigned(snap) -> dict[str, tuple[int, ...]]:
    return {s.job_id: s.gpus for s in plan(snap).starts}


def burst(team: str, n: int, *, first_seq: int = 0, **fields) -> list:
    return [pending(f"{team}{i}", team=team, seq=first_seq + i, **fields) for i in range(n)]


# -- order: strict tiers, then fair share, then age, then submit time and seq ----------

@pytest.mark.parametrize("snap, expected", [
    pytest.param(snapshot(1, pending=[pending("low", tier="low", submitted_at=0),
                                      pending("normal", tier="normal", submitted_at=1),
                                      pending("high", tier="high", submitted_at=2)]),
                 ["high"], id="a high job submitted last starts first"),
    pytest.param(snapshot(2, pending=[pending("low", tier="low", submitted_at=0),
                                      pending("normal", tier="normal", submitted_at=1),
                                      pending("high", tier="high", submitted_at=2)]),
                 ["high", "normal"], id="tiers fill in order"),
    pytest.param(snapshot(1, pending=[pending("low", tier="low", team="idle", submitted_at=0),
                                      pending("normal", tier="normal", team="busy", submitted_at=5)],
                          usage={"busy": 1e9}),
                 ["normal"], id="a tier beats fair share"),
    pytest.param(snapshot(1, pending=[pending("a", team="heavy", submitted_at=0),
                                      pending("b", team="light", submitted_at=50)],
                          usage={"heavy": 1000.0}),
                 ["b"], id="a team with past usage goes after a team without"),
    pytest.param(snapshot(1, pending=[pending("a", team="heavy", submitted_at=0),
                                      pending("b", team="light", submitted_at=50)],
                          running=[running("r", team="heavy", gpus=[1])], usage={}),
                 ["b"], id="GPUs held now count as usage"),
    pytest.param(snapshot(1, pending=[pending("day", team="light", expected_runtime=DAY),
                                      pending("ten-min", team="heavy", submitted_at=3.5 * DAY, expected_runtime=600)],
                          usage={"heavy": 1000.0}, now=7 * DAY),
                 ["ten-min"], id="a job expected to run minutes beats a day-long one, fair share and age both "
                                 "against it"),
    pytest.param(snapshot(1, pending=[pending("day", expected_runtime=DAY),
                                      pending("3h", submitted_at=7 * DAY, expected_runtime=3 * 3600)], now=7 * DAY),
                 ["day"], id="a week's wait outweighs an expected run time 8 times shorter"),
    pytest.param(snapshot(1, pending=[pending("day", expected_runtime=DAY),
                                      pending("1h", submitted_at=7 * DAY, expected_runtime=3600)], now=7 * DAY),
                 ["1h"], id="but not one 24 times shorter"),
    pytest.param(snapshot(1, pending=[pending("3h", team="heavy", expected_runtime=3 * 3600),
                                      pending("1h", team="heavy", submitted_at=50, expected_runtime=3600),
                                      pending("2h", team="light", submitted_at=99, expected_runtime=2 * 3600)],
                          usage={"heavy": 1000.0}),
                 ["2h"], id="fair share settles jobs expected to run within a few times as long"),
    pytest.param(snapshot(1, pending=[pending("day", team="light", expected_runtime=DAY),
                                      pending("ten-min", team="heavy", submitted_at=50, expected_runtime=600)],
                          usage={"heavy": 1000.0},
                          policy=Policy(weights=dataclasses.replace(Policy().weights, duration=0.0))),
                 ["day"], id="with no duration weight, fair share alone"),
    pytest.param(snapshot(1, pending=[pending("young", submitted_at=DAY), pending("old", submitted_at=0, seq=1)],
                          now=2 * DAY),
                 ["old"], id="older first within a team"),
    pytest.param(snapshot(1, pending=[pending("young", team="x", submitted_at=DAY),
                                      pending("old", team="y", submitted_at=0)], now=2 * DAY),
                 ["old"], id="older first when fair share is equal"),
    pytest.param(snapshot(1, pending=[pending("old", team="a", submitted_at=0, wall_time=3600),
                                      pending("young", team="a", submitted_at=4 * DAY, seq=1, wall_time=60),
                                      pending("b", team="b", submitted_at=5 * DAY, seq=2, wall_time=60)],
                          now=10 * DAY),
                 ["young"], id="a team's jobs that reached max_age and those that did not, ranked together"),
    pytest.param(snapshot(1, pending=[pending("second", submitted_at=5.0, seq=7),
                                      pending("first", submitted_at=4.0, seq=9)]),
                 ["first"], id="ties: earlier submit time (both ages saturated)"),
    pytest.param(snapshot(1, pending=[pending("later", submitted_at=5.0, seq=8),
                                      pending("earlier", submitted_at=5.0, seq=3)]),
                 ["earlier"], id="ties: lower seq"),
])
def test_order(snap, expected):
    assert starts(snap) == expected


def test_order_lists_tiers_strictly():
    snap = snapshot(0, pending=[pending("l", tier="low"), pending("h", tier="high", submitted_at=9),
                                pending("n", tier="normal")])
    assert plan(snap).order == ["h", "n", "l"]


def test_equal_shares_interleave_across_one_pass():
    snap = snapshot(8, pending=burst("A", 4) + burst("B", 4, first_seq=4))
    assert starts(snap) == ["A0", "B0", "A1", "B1", "A2", "B2", "A3", "B3"]


@pytest.mark.parametrize("share_a, share_b, gpus_a, gpus_b", [
    (3, 1, 6, 2),
    (1, 1, 4, 4),
    (1, 3, 2, 6),
])
def test_shares_split_the_gpus(share_a, share_b, gpus_a, gpus_b):
    snap = snapshot(8, pending=burst("A", 20) + burst("B", 20, first_seq=20),
                    teams={"A": TeamPolicy(share=share_a), "B": TeamPolicy(share=share_b)})
    started = starts(snap)
    assert (sum(j.startswith("A") for j in started), sum(j.startswith("B") for j in started)) == (gpus_a, gpus_b)


def test_factors_are_normalised():
    snap = snapshot(2, pending=[pending("a", team="x", submitted_at=0), pending("b", team="y", submitted_at=DAY)],
                    usage={"x": 500.0, "y": 0.0}, now=14 * DAY)
    factors = plan(snap).factors
    assert set(factors) == {"a", "b"}
    for f in factors.values():
        assert 0.0 <= f.fair_share <= 1.0 and 0.0 <= f.age <= 1.0 and 0.0 <= f.size <= 1.0
    assert factors["a"].age == 1.0                      # saturates at max_age (7 days)
    assert factors["b"].fair_share > factors["a"].fair_share


class _UsageNotToRead(dict):
    """Past usage a pass must not read: every way a pass could read it fails the test."""
    def _refuse(self, *args, **kwargs):
        raise AssertionError("the pass read the teams' past usage")
    values = items = keys = get = __getitem__ = __iter__ = _refuse


@pytest.mark.parametrize("ordering, reads", [("fifo", False), ("sjf", False), ("multifactor", True)])
def test_only_a_multifactor_pass_works_out_the_teams_fair_share(ordering, reads):
    """FIFO and SJF rank without it: a replay's every pass would otherwise pay for it."""
    snap = snapshot(2, pending=[pending("a", team="x", wall_time=60.0), pending("b", team="y", wall_time=30.0)],
                    usage=None, policy=Policy(ordering=ordering))
    snap = dataclasses.replace(snap, usage=_UsageNotToRead({"x": 500.0}))
    if reads:
        with pytest.raises(AssertionError, match="past usage"):
            plan(snap)
    else:
        assert set(starts(snap)) == {"a", "b"}


# -- quotas: skip, never block -----------------------------------------------------------

NO_BACKFILL = Policy(backfill=False)  # FIFO blocking: a blocked job holds its GPU types


@pytest.mark.parametrize("snap, started, waiting, reason", [
    pytest.param(
        snapshot(16, pending=[pending("v1", team="vision", submitted_at=0), pending("n1", team="nlp", submitted_at=1)],
                 running=[running("r", team="vision", gpus=range(8))], teams={"vision": {"max_gpus": 8}}),
        ["n1"], "v1", "team vision at 8 of 8 GPUs; needs 1 more", id="team cap"),
    pytest.param(
        snapshot(16, pending=[pending("v1", team="vision", gpus=4), pending("n1", team="nlp", seq=1)],
                 running=[running("r", team="vision", gpus=range(6))], teams={"vision": {"max_gpus": 8}}),
        ["n1"], "v1", "team vision at 6 of 8 GPUs; needs 4 more", id="team cap, partly used"),
    pytest.param(
        snapshot(8, pending=[pending("b1", team="vision", user="bob"),
                             pending("a1", team="vision", user="alice", seq=1)],
                 running=[running("r", team="vision", user="bob", gpus=[0, 1])],
                 teams={"vision": {"max_gpus_per_user": 2}}),
        ["a1"], "b1", "user bob at 2 of 2 GPUs allowed per user in team vision; needs 1 more", id="user cap"),
    pytest.param(
        snapshot(4, pending=[pending("g1", group="g", group_limit=2), pending("g2", group="g", group_limit=2, seq=1),
                             pending("other", seq=2)],
                 running=[running("g0", group="g", gpus=[0])]),
        ["g1", "other"], "g2", "array g at 2 of 2 tasks running at once", id="array limit"),
    pytest.param(
        snapshot(4, pending=[pending("v1", team="vision", tier="high", gpus=2), pending("n1", team="nlp", gpus=2)],
                 teams={"vision": {"max_gpus": 0}}),
        ["n1"], "v1", "team vision at 0 of 0 GPUs", id="a capped high job does not block a normal one"),
])
def test_quota(snap, started, waiting, reason):
    result = plan(snap)
    assert [s.job_id for s in result.starts] == started
    assert reason in result.waiting[waiting]


def test_team_cap_counts_gpus_handed_out_in_the_same_pass():
    snap = snapshot(8, pending=burst("vision", 5), teams={"vision": {"max_gpus": 3}})
    result = plan(snap)
    assert [s.job_id for s in result.starts] == ["vision0", "vision1", "vision2"]
    assert result.waiting["vision3"] == "team vision at 3 of 3 GPUs; needs 1 more"


# -- fit: gang, reservation, GPU types and indices ---------------------------------------

@pytest.mark.parametrize("snap, started, waiting, reason", [
    pytest.param(snapshot(4, pending=[pending("big", gpus=4)], running=[running("r", gpus=[0, 1])]),
                 [], "big", "needs 4 GPUs, 2 free", id="gang: 4 GPUs with 2 free"),
    pytest.param(snapshot(4, policy=NO_BACKFILL,
                          pending=[pending("big", gpus=4, submitted_at=0), pending("small", submitted_at=1)],
                          running=[running("r", gpus=[0, 1])]),
                 [], "small", "waiting behind job big, which is first in line for GPUs",
                 id="a blocked head reserves the GPUs"),
    pytest.param(snapshot({"a10g": 2, "h100": 2}, policy=NO_BACKFILL, running=[running("r", gpus=[2])],
                          pending=[pending("big", gpus=2, gpu_type="h100"), pending("small", gpu_type="h100", seq=1)]),
                 [], "small", "waiting behind job big, which is first in line for h100 GPUs",
                 id="a blocked typed head reserves its type"),
    pytest.param(snapshot({"a10g": 2, "h100": 2}, pending=[pending("x", gpus=3)]),
                 [], "x", "needs 3 GPUs, 4 free, at most 2 of one type", id="a gang never spans types"),
    pytest.param(snapshot({"a10g": 2, "h100": 2}, pending=[pending("x", gpu_type="v100"), pending("y", seq=1)]),
                 ["y"], "x", "needs 1 GPU of v100; this cluster has none of that type (has: a10g, h100)",
                 id="a type not present waits and blocks nobody"),
    pytest.param(snapshot(2, pending=[pending("huge", gpus=8), pending("y", seq=1)]),
                 ["y"], "huge", "needs 8 GPUs, 2 free; the queue has 2 in all, so it cannot start until it has more "
                 "(gqa update huge --gpus N, or gqa cancel huge)", id="a job larger than the cluster blocks nobody"),
    pytest.param(snapshot({"a10g": 2, "h100": 2},
                          pending=[pending("big", gpus=3, gpu_type="h100"), pending("any", seq=1),
                                   pending("a10g", gpu_type="a10g", seq=2)]),
                 ["any", "a10g"], "big", "needs 3 GPUs of h100",
                 id="jobs that cannot fit ever do not reserve"),
    pytest.param(snapshot({"a10g": 2, "h100": 2}, pending=[pending("big", gpus=2, gpu_type="h100", seq=0),
                                                        pending("any", seq=1), pending("a10g", gpu_type="a10g", seq=2)],
                          running=[running("r", gpus=[2])]),
                 ["any", "a10g"], "big", "needs 2 GPUs of h100, 1 free",
                 id="other types stay usable behind a typed head"),
    pytest.param(snapshot({"a10g": 1, "h100": 2}, policy=NO_BACKFILL,
                          pending=[pending("big", gpus=2, gpu_type="h100", seq=0), pending("any", seq=1)],
                          running=[running("r", gpus=[0, 1])]),
                 [], "any", "waiting behind job big, which is first in line for h100 GPUs",
                 id="an untyped job does not take a reserved type"),
    pytest.param(snapshot(4, pending=[pending("v1", team="vision", gpus=4), pending("n1", team="nlp", seq=1)],
                          teams={"vision": {"max_gpus": 2}}),
                 ["n1"], "v1", "team vision at 0 of 2 GPUs; needs 4 more", id="a job over quota reserves nothing"),
])
def test_fit(snap, started, waiting, reason):
    result = plan(snap)
    assert [s.job_id for s in result.starts] == started
    assert reason in result.waiting[waiting]


@pytest.mark.parametrize("snap, expected", [
    pytest.param(snapshot(4, pending=[pending("a", gpus=2)]), {"a": (0, 1)}, id="lowest free indices"),
    pytest.param(snapshot(4, pending=[pending("a", gpus=2)], running=[running("r", gpus=[0, 2])]),
                 {"a": (1, 3)}, id="never a GPU held by a running job"),
    pytest.param(snapshot(4, pending=[pending("a", gpus=2), pending("b", seq=1), pending("c", seq=2)]),
                 {"a": (0, 1), "b": (2,), "c": (3,)}, id="never the same GPU twice in one pass"),
    pytest.param(snapshot({"a10g": 2, "h100": 2}, pending=[pending("h", gpus=2, gpu_type="h100")]),
                 {"h": (2, 3)}, id="only GPUs of the asked type"),
    pytest.param(snapshot({"a10g": 1, "h100": 3}, pending=[pending("x")]),
                 {"x": (0,)}, id="best fit: the type with the fewest free GPUs that holds the gang"),
    pytest.param(snapshot({"a10g": 1, "h100": 3}, pending=[pending("x", gpus=2)]),
                 {"x": (1, 2)}, id="best fit skips a type too small"),
])
def test_gpu_indices(snap, expected):
    assert assigned(snap) == expected


# -- CPUs and memory, when the snapshot accounts for them -------------------------------------

@pytest.mark.parametrize("snap, started, waiting, reason", [
    pytest.param(snapshot(8, cpus=8, pending=[pending("c", cpus=4)], running=[running("r", cpus=6)]),
                 [], "c", "needs 4 CPUs, 2 free", id="CPUs held by running jobs"),
    pytest.param(snapshot(8, cpus=8, pending=[pending("a", cpus=6), pending("b", cpus=4, seq=1)]),
                 ["a"], "b", "needs 4 CPUs, 2 free", id="CPUs handed out in the same pass"),
    pytest.param(snapshot(8, memory=16 * GiB, pending=[pending("m", memory=16 * GiB)],
                          running=[running("r", memory=8 * GiB)]),
                 [], "m", "needs 16Gi memory, 8Gi free", id="memory held by running jobs"),
    pytest.param(snapshot(8, cpus=4, memory=GiB, pending=[pending("free", cpus=64, memory=64 * GiB),
                                                          pending("other", seq=1)]),
                 ["other"], "free", "needs 64 CPUs, 4 free", id="a job asking more than exists blocks nobody"),
])
def test_cpus_and_memory(snap, started, waiting, reason):
    result = plan(snap)
    assert [s.job_id for s in result.starts] == started
    assert reason in result.waiting[waiting]


def test_cpus_and_memory_are_ignored_when_not_declared():
    snap = snapshot(2, pending=[pending("a", cpus=512, memory=1024 * GiB)], running=[running("r", cpus=64)])
    assert starts(snap) == ["a"]


def test_empty_queue_and_empty_cluster():
    assert plan(snapshot(4)).starts == []
    result = plan(snapshot(0, pending=[pending("a")]))
    assert result.starts == [] and result.waiting["a"] == "needs 1 GPU, 0 free"


# -- hard limits at submit ----------------------------------------------------------------------

def problems(*, gpus_asked=1, gpu_type=None, wall_time=None, cpus=None, memory=None, inventory=4,
             policy=None, **kw) -> list[str]:
    return hard_limit_problems(gpus=gpus_asked, gpu_type=gpu_type, wall_time=wall_time, cpus=cpus, memory=memory,
                               inventory=gpus(inventory), policy=policy or Policy(), **kw)


@pytest.mark.parametrize("kwargs, expected", [
    ({}, []),
    ({"gpus_asked": 4}, []),
    ({"gpus_asked": 8}, ["asks for 8 GPUs; the queue has 4"]),
    ({"gpus_asked": 2, "gpu_type": "h100", "inventory": {"a10g": 2, "h100": 1}},
     ["asks for 2 h100 GPUs; the queue has 1"]),
    ({"gpu_type": "v100", "inventory": {"a10g": 2, "h100": 1}},
     ["asks for v100 GPUs; the queue has 2 a10g, 1 h100"]),
    ({"gpu_type": "h100", "inventory": 0}, ["asks for h100 GPUs; the queue has no GPUs"]),
    ({"gpus_asked": 4, "policy": Policy(max_gpus_per_job=2)}, ["asks for 4 GPUs; the limit per job is 2"]),
    ({"gpus_asked": 2, "policy": Policy(max_gpus_per_job=2)}, []),
    ({"gpus_asked": 4, "team_max_gpus": 2, "team": "vision"}, ["asks for 4 GPUs; team vision may hold at most 2"]),
    ({"wall_time": 3 * DAY, "policy": Policy(max_wall_time=DAY)}, ["asks for 3d00h wall time; the limit is 1d00h"]),
    ({"wall_time": DAY, "policy": Policy(max_wall_time=DAY)}, []),
    ({"wall_time": 3 * DAY}, []),
    ({"cpus": 64, "total_cpus": 32}, ["asks for 64 CPUs; the queue has 32"]),
    ({"memory": 512 * GiB, "total_memory": 256 * GiB}, ["asks for 512Gi memory; the queue has 256Gi"]),
    ({"gpus_asked": 16, "policy": Policy(max_gpus_per_job=8), "wall_time": 2 * DAY, "inventory": 8},
     ["asks for 16 GPUs; the queue has 8", "asks for 16 GPUs; the limit per job is 8"]),
])
def test_hard_limit_problems(kwargs, expected):
    assert problems(**kwargs) == expected
