"""The policy registry: each name replays the same workload, worked out by hand."""

import pytest

from gqa.scheduling import Gpu, TeamPolicy
from gqa.sim.engine import cluster
from gqa.sim.metrics import ratios, summarize
from gqa.sim.policies import NAMES, left_out, run_policy
from gqa.sim.workload import SimJob, Workload


def job(id, submit, duration, gpus=1, wall=None, seq=0, tier=1):
    return SimJob(id=id, seq=seq, submit=submit, duration=duration, gpus=gpus, team="t", user="u", tier=tier,
                  wall_time=wall or duration)


def work(*jobs):
    return Workload(jobs=list(jobs), teams={"t": TeamPolicy()})


def starts(name, w, gpus=1):
    return {o.id: o.start for o in run_policy(name, w, cluster(gpus)).outcomes}


# one GPU, busy until 100; three jobs wait, their wall times telling the opposite of their runs
WAITING = work(job("busy", 0, 100, seq=0),
               job("a", 1, 300, wall=400, seq=1),       # asks least, runs longest
               job("b", 2, 50, wall=7200, seq=2),       # asks most, runs shortest
               job("c", 3, 100, wall=3600, seq=3))


@pytest.mark.parametrize("name, order", [
    ("sjf-oracle", {"b": 100, "c": 150, "a": 250}),    # true run times: b 50, c 100, a 300
    ("gqa", {"a": 100, "c": 400, "b": 500}),           # by wall time: a 400, c 3600, b 7200
    ("fifo", {"a": 100, "b": 400, "c": 450}),
    ("las", {"a": 100, "b": 400, "c": 450}),           # nobody reaches the threshold: FIFO
])
def test_who_goes_first_once_the_gpu_frees(name, order):
    assert {k: v for k, v in starts(name, WAITING).items() if k != "busy"} == order


def test_the_oracle_knows_an_under_estimate_ends_at_its_wall_time():
    # "under" asks 100 s and needs 500: killed at 100, so the oracle ranks it as 100 s, before "mid" (200)
    w = work(job("busy", 0, 10, seq=0), job("mid", 1, 200, wall=250, seq=1), job("under", 2, 500, wall=100, seq=2))
    result = run_policy("sjf-oracle", w, cluster(1))
    out = {o.id: o for o in result.outcomes}
    assert (out["under"].start, out["under"].end, out["under"].timed_out) == (10, 110, True)
    assert out["mid"].start == 110 and out["mid"].wall_time == 250   # the outcome keeps what the user asked


def test_fifo_easy_backfills_in_the_replay_and_fifo_does_not():
    # 4 GPUs: r holds 2 until 100; head needs 4 (reserved at 100); small ends by 2 + 90 <= 100
    w = work(job("r", 0, 100, gpus=2, seq=0), job("head", 1, 50, gpus=4, seq=1),
             job("small", 2, 50, wall=90, seq=2), job("long", 3, 50, wall=200, seq=3))
    assert starts("fifo-easy", w, 4) == {"r": 0, "head": 100, "small": 2, "long": 150}
    assert starts("fifo", w, 4) == {"r": 0, "head": 100, "small": 150, "long": 150}


def test_every_policy_replays_and_ratios_take_a_base():
    w = work(*(job(f"j{i}", i * 30, 100 + 37 * i % 200, gpus=1 + i % 2, seq=i) for i in range(12)))
    summaries = {name: summarize(run_policy(name, w, cluster(3))) for name in NAMES}
    assert all(s["finished"] == 12 for s in summaries.values())
    assert set(ratios(summaries)) == set(NAMES) - {"fifo"}
    against_oracle = ratios(summaries, base="sjf-oracle")
    assert set(against_oracle) == set(NAMES) - {"sjf-oracle"}
    assert against_oracle["fifo"]["mean_jct"] == summaries["fifo"]["mean_jct"] / summaries["sjf-oracle"]["mean_jct"]


def test_unknown_names_and_las_on_several_pools_are_refused():
    with pytest.raises(ValueError, match="unknown policy 'srtf'"):
        run_policy("srtf", WAITING, cluster(1))
    mixed = (Gpu(0, "a100", price=4.0), Gpu(1, "a100", price=1.5, spot=True))
    with pytest.raises(ValueError, match="one pool of identical GPUs"):
        run_policy("las", WAITING, mixed)
    priced = run_policy("las", WAITING, (Gpu(0, "h100", price=3.6),))
    assert priced.gpu_seconds_by_pool == {"h100": 550.0}
    assert sum(o.cost for o in priced.outcomes) == pytest.approx(550 / 3600 * 3.6)


MIXED = (Gpu(0, "a100", price=4.0), Gpu(1, "a100", price=1.5, spot=True))
TIERED = work(job("hi", 0, 10, tier=0), job("lo", 1, 10, tier=2, seq=1))


@pytest.mark.parametrize("w, gpus, restart, left", [
    pytest.param(TIERED, cluster(2), None, set(), id="several tiers, one pool: every policy"),
    pytest.param(WAITING, cluster(2), None, {"las-tiers"}, id="one tier: las-tiers would replay as las"),
    pytest.param(TIERED, MIXED, None, {"las", "las-tiers"}, id="pools las cannot model"),
    pytest.param(TIERED, cluster(2), 119.0, set(), id="a reload under the 2-minute least run"),
    pytest.param(TIERED, cluster(2), 120.0, {"gqa-slice"}, id="a reload as long as the least run"),
])
def test_what_a_replay_of_every_policy_leaves_out_and_why(w, gpus, restart, left):
    out = left_out(w, gpus, restart_cost=restart)
    assert set(out) == left
    for name, why in out.items():   # what it says is what run_policy refuses with, where it refuses
        if name != "las-tiers" or "pool" in why:
            with pytest.raises(ValueError) as refused:
                run_policy(name, w, gpus, restart_cost=restart)
            assert why in str(refused.value)


def test_gqa_backfilling_by_predictions_starts_a_reserved_job_when_jobs_are_expected_to_end():
    """Team t's 200 past jobs used a tenth of what they asked, so its "r" (asks 10 hours, runs 1) is
    expected to free its GPUs in an hour. "head" needs all 4 GPUs. "mid", of team u with no history,
    asks 9 hours and uses them. By limits head is reserved for r's 10 hours, mid ends before that and
    is backfilled onto the free GPUs, and head waits for mid; by predictions head is reserved for r's
    expected end, mid would run past it and waits. fifo-easy counts limits either way."""
    history = [SimJob(id=f"h{n}", seq=n, submit=n * 100.0, duration=360.0, gpus=1, team="t", user="u", tier=1,
                      wall_time=3_600.0) for n in range(200)]
    t0 = 20_500.0
    scenario = [SimJob(id="r", seq=200, submit=t0, duration=3_600.0, gpus=2, team="t", user="u", tier=1,
                       wall_time=36_000.0),
                SimJob(id="head", seq=201, submit=t0 + 1, duration=600.0, gpus=4, team="t", user="u", tier=1,
                       wall_time=3_600.0),
                SimJob(id="mid", seq=202, submit=t0 + 2, duration=32_400.0, gpus=2, team="u", user="v", tier=1,
                       wall_time=32_400.0)]
    w = Workload(jobs=history + scenario, teams={"t": TeamPolicy(), "u": TeamPolicy()})

    def started(name, by):
        return {o.id: o.start for o in run_policy(name, w, cluster(4), backfill_by=by).outcomes
                if o.id in ("r", "head", "mid")}
    assert started("gqa", "limits") == {"r": t0, "head": t0 + 2 + 32_400.0, "mid": t0 + 2}
    assert started("gqa", "predictions") == {"r": t0, "head": t0 + 3_600.0, "mid": t0 + 3_600.0 + 600.0}
    assert started("fifo-easy", "predictions") == started("fifo-easy", "limits") == started("gqa", "limits")
    with pytest.raises(ValueError, match="backfill counts run times by limits or predictions"):
        run_policy("gqa", w, cluster(4), backfill_by="guesses")
