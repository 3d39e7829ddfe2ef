"""Spot in the replay: what a reclaim costs a job with and without a save on
the interruption notice, the restart cost of a resumed attempt, and the
published facts turned into rates and prices."""

import json
import math
from types import SimpleNamespace

import pytest

from gqa.scheduling import Policy, Start, TeamPolicy
from gqa.scheduling.presets import preset
from gqa.sim import engine as engine_module
from gqa.sim.engine import cluster, simulate
from gqa.sim.pools import Pool, pool_gpus, reclaim_rates
from gqa.sim.spot_facts import (
    ADVISOR_RATES,
    MULTI_NODE_RATE,
    NOTICE_SECONDS,
    PRICES,
    RECLAIM_LEVELS,
    V100_WEEK_RATE,
    per_hour_from_losses,
    per_hour_from_monthly_share,
)
from gqa.sim.workload import SimJob, Workload

SPOT = [Pool("spot", "a100", True, 1, 1.0, reclaim_rate_per_hour=1.0)]
NEVER = 1e12


def spot_job(duration=10_000.0):
    return SimJob(id="j", seq=0, submit=0.0, duration=duration, gpus=1, team="t", user="u", tier=1,
                  wall_time=4 * duration, spot=True)


def reclaims_after(monkeypatch, *delays):
    """Each attempt's capacity is reclaimed this many seconds after it starts, in turn; then never."""
    left = list(delays)
    monkeypatch.setattr(engine_module, "random", SimpleNamespace(
        Random=lambda seed: SimpleNamespace(expovariate=lambda rate: left.pop(0) if left else NEVER)))


def replay(**options):
    gpus, pool_of = pool_gpus(SPOT)
    w = Workload(jobs=[spot_job()], teams={"t": TeamPolicy()})
    [out] = simulate(w, gpus, preset("gqa"), pool_of=pool_of, reclaim_per_hour=reclaim_rates(SPOT),
                     checkpoint_interval=1800.0, **options).outcomes
    return out


@pytest.mark.parametrize("save_on_notice, restart, lost", [
    pytest.param(False, 0.0, 4000 - 3600, id="no save: the work since the 3600 s checkpoint"),
    pytest.param(True, 0.0, NOTICE_SECONDS, id="save on notice: only the notice"),
    pytest.param(True, 60.0, NOTICE_SECONDS + 60, id="save on notice, 60 s restart: notice + restart"),
    pytest.param(False, 60.0, 4000 - 3600 + 60, id="no save, 60 s restart"),
])
def test_a_reclaim_loses_what_the_model_says(monkeypatch, save_on_notice, restart, lost):
    reclaims_after(monkeypatch, 4000.0)
    out = replay(save_on_notice=save_on_notice, restart_cost=restart)
    assert (out.reclaims, out.attempts) == (1, 2)
    assert out.end == 10_000 + lost               # resumed at once: the GPU is free again at 4000
    assert out.gpu_seconds == 10_000 + lost


def test_a_resume_reclaimed_during_its_warm_up_loses_only_the_time_it_ran(monkeypatch):
    reclaims_after(monkeypatch, 4000.0, 30.0)      # the second attempt goes 30 s in, before its 60 s reload
    out = replay(save_on_notice=True, restart_cost=60.0)
    assert (out.reclaims, out.attempts) == (2, 3)
    assert out.end == 10_000 + NOTICE_SECONDS + 30 + 60


def test_on_a_spot_only_cluster_a_job_reclaimed_past_the_fallback_limit_still_runs(monkeypatch):
    """Past `spot_fallback_after` reclaims a job tries on demand first; with none, spot again."""
    times = preset("gqa").spot_fallback_after + 2
    reclaims_after(monkeypatch, *[2000.0] * times)
    out = replay(save_on_notice=True)
    assert (out.reclaims, out.attempts) == (times, times + 1)
    assert out.end == 10_000 + times * NOTICE_SECONDS


def test_the_notice_never_keeps_less_than_the_periodic_checkpoint(monkeypatch):
    reclaims_after(monkeypatch, 1850.0)            # the notice (1730 s) came before the 1800 s checkpoint
    assert replay(save_on_notice=True).end == 10_000 + 50


def test_a_preempted_job_pays_the_restart_cost(monkeypatch):
    script = {0: ([("long", (0,))], []), 100: ([("urgent", (0,))], ["long"]), 150: ([("long", (0,))], [])}

    def scripted(snap, **kw):
        starts, preempt = script.pop(snap.now, ([], []))
        return SimpleNamespace(starts=[Start(j, g) for j, g in starts], preempt=preempt)

    monkeypatch.setattr(engine_module, "plan", scripted)
    jobs = [SimJob("long", 0, 0.0, 1000.0, 1, "t", "u", 1, 2000.0),
            SimJob("urgent", 1, 100.0, 50.0, 1, "t", "u", 1, 50.0)]
    w = Workload(jobs=jobs, teams={"t": TeamPolicy()})
    long, _ = simulate(w, cluster(1), Policy(), checkpoint_interval=30, may_preempt=True, restart_cost=25).outcomes
    assert long.end == 150 + (1000 - 90) + 25        # checkpointed at 90 s, then 25 s to reload


def test_a_negative_restart_cost_is_refused():
    with pytest.raises(ValueError, match="restart_cost"):
        simulate(Workload(jobs=[], teams={}), cluster(1), Policy(), restart_cost=-1)


# -- the facts as rates and prices ---------------------------------------------------------------------------

def test_a_monthly_share_becomes_the_hazard_that_interrupts_that_share_in_a_month():
    rate = per_hour_from_monthly_share(0.2)
    assert 1 - math.exp(-rate * 730.5) == pytest.approx(0.2)
    assert ADVISOR_RATES["<5%"] == pytest.approx(per_hour_from_monthly_share(0.025))
    assert ADVISOR_RATES[">20%"] == rate
    with pytest.raises(ValueError):
        per_hour_from_monthly_share(1.0)


def test_measured_losses_are_counted_per_hour_a_node_was_alive():
    assert per_hour_from_losses(10, 2, 5) == 1.0
    # single V100: 50.5 losses over 55% of 7.4 days
    assert V100_WEEK_RATE == pytest.approx(50.5 / (0.55 * 7.4 * 24))
    # 4- and 16-node groups: 2 x 120.5 decreases over (2.35 + 7.8) nodes x 2.5 weeks
    assert MULTI_NODE_RATE == pytest.approx(241 / (10.15 * 420))
    assert RECLAIM_LEVELS["low"] < RECLAIM_LEVELS["medium"] < RECLAIM_LEVELS["high"]


def test_prices_per_gpu_hour():
    p4d = PRICES["p4d.24xlarge"]
    assert p4d.on_demand_per_gpu_hour == pytest.approx(32.7726 / 8)
    assert p4d.spot_range_per_gpu_hour == pytest.approx((5.09 / 8, 9.61 / 8))
    assert p4d.spot_per_gpu_hour == pytest.approx(7.35 / 8)
    assert all(p.spot_high < p.on_demand for p in PRICES.values())


# -- gqa simulate ------------------------------------------------------------------------------------------

def simulate_cli(capsys, *args):
    from cli.main import main

    capsys.readouterr()
    code = main(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def twelve_jobs_on_two_pools(tmp_path, capsys):
    """`gqa simulate` of twelve 3-hour jobs on 2 on-demand and 4 spot GPUs (1 reclaim an hour)
    under gqa, as a function of the extra options, giving the JSON."""
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit_time,duration,gpus\n" + "\n".join(f"{i * 600},{3 * 3600},1" for i in range(12)) + "\n")
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: od, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 4.1}\n"
                     "- {name: spot, gpu_type: a100, spot: true, gpus: 4, price_per_gpu_hour: 0.92,"
                     " reclaim_rate_per_hour: 1.0}\n")
    base = [str(trace), "--pools", str(pools), "--policies", "gqa", "--eta-every", "0", "-o", "json"]

    def replayed(*extra):
        code, out, err = simulate_cli(capsys, *base, *extra)
        assert code == 0, err
        return json.loads(out)
    return replayed


def test_gqa_simulate_checkpoint_on_notice_and_restart_cost(tmp_path, capsys):
    replayed = twelve_jobs_on_two_pools(tmp_path, capsys)
    periodic, on_notice = replayed(), replayed("--checkpoint-on-notice", "--restart-cost", "60s")
    lost = {name: data["policies"]["gqa"]["gpu_hours"] - 12 * 3 for name, data in
            (("periodic", periodic), ("notice", on_notice))}
    reclaims = on_notice["policies"]["gqa"]["reclaims"]
    assert periodic["policies"]["gqa"]["reclaims"] > 0 and reclaims > 0
    # with a save on each notice a reclaim costs its 2 minutes and the next attempt's reload, no more
    # (less where the attempt was reclaimed within its first 2 minutes)
    assert 0 < lost["notice"] <= reclaims * (NOTICE_SECONDS + 60) / 3600 + 1e-9
    assert lost["notice"] < lost["periodic"]
    said = " ".join(on_notice["assumptions"])
    assert "or from the 2-minute notice" in said and "spends 60s reloading" in said
    assert "on demand first once reclaimed more than 2 times and more than once per 4 hours run" in said


def test_gqa_simulate_refuses_a_bad_restart_cost(tmp_path, capsys):
    code, out, err = simulate_cli(capsys, str(tmp_path / "none.csv"), "--gpus", "2", "--restart-cost", "soon")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--restart-cost: invalid duration 'soon'" in err


def test_gqa_simulate_takes_zero_for_no_restart_cost_and_none_for_no_checkpoint(tmp_path, capsys):
    replayed = twelve_jobs_on_two_pools(tmp_path, capsys)
    # --restart-cost 0 was refused as not positive
    runs = {"default": replayed(), "zero": replayed("--restart-cost", "0"),
            "none": replayed("--checkpoint-interval", "none")}
    assert runs["zero"]["policies"] == runs["default"]["policies"]
    assert any("requeues the job from its start (no periodic checkpoint)" in a for a in runs["none"]["assumptions"])
    # a reclaim loses the whole attempt, not the work since a checkpoint: more GPU time for the same work
    assert runs["none"]["policies"]["gqa"]["gpu_hours"] > runs["default"]["policies"]["gqa"]["gpu_hours"]


@pytest.mark.parametrize("delays, options, given_up", [
    pytest.param((1000.0,) * 2, {}, False, id="reclaimed twice, then it runs to its end"),
    pytest.param((1000.0,) * 3, {}, True, id="never reaching a checkpoint: given up at the third"),
    pytest.param((2000.0,) * 3, {}, True, id="keeping work each time, too slowly: given up all the same"),
    pytest.param((1000.0,) + (100.0,) * 2, {"save_on_notice": True, "restart_cost": 200.0}, True,
                 id="reclaimed while reloading"),
])
def test_a_job_reclaimed_again_and_again_is_given_up(monkeypatch, delays, options, given_up):
    monkeypatch.setattr(engine_module, "MAX_RECLAIMS", 3)
    reclaims_after(monkeypatch, *delays)
    out = replay(**options)
    assert (out.given_up, out.reclaims, out.end is None) == (given_up, len(delays), given_up)


def test_a_run_that_cannot_outlast_its_reclaims_ends_the_replay(tmp_path):
    """100 hours on spot alone at 0.5 reclaims an hour with no checkpoint inside it: reclaimed
    forever before, and the replay never ended."""
    from gqa.sim.metrics import summarize

    pools = [Pool("spot", "a100", True, 2, 1.0, reclaim_rate_per_hour=0.5)]
    gpus, pool_of = pool_gpus(pools)
    w = Workload(jobs=[spot_job(duration=360_000.0)], teams={"t": TeamPolicy()})
    result = simulate(w, gpus, preset("gqa"), pool_of=pool_of, reclaim_per_hour=reclaim_rates(pools),
                      checkpoint_interval=1000 * 3600.0)
    [out] = result.outcomes
    assert out.given_up and out.end is None and out.reclaims == engine_module.MAX_RECLAIMS
    assert {k: summarize(result)[k] for k in ("finished", "unfinished", "given_up")} == \
        {"finished": 0, "unfinished": 1, "given_up": 1}


def test_gqa_simulate_says_which_jobs_it_gave_up(tmp_path, capsys):
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit_time,duration,gpus\n0,360000,1\n0,600,1\n")
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: spot, gpu_type: a100, spot: true, gpus: 2, price_per_gpu_hour: 1,"
                     " reclaim_rate_per_hour: 0.5}\n")
    code, out, err = simulate_cli(capsys, str(trace), "--pools", str(pools), "--policies", "gqa",
                                  "--checkpoint-interval", "1000h", "--eta-every", "0")
    assert code == 0, err
    assert "gqa: 1 job was given up, unfinished, at 10,000 reclaims, losing work faster than checkpoints" in out
