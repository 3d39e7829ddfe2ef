"""Pools: a GPU type bought spot or on demand. Spot first for spot-tolerant
jobs, on demand first for a job reclaimed too often for how long it ran; a gang
never spans pools."""

import pytest

from gqa.scheduling import Gpu, plan
from gqa.scheduling.inventory import SPOT_HOURS_PER_RECLAIM, spot_first
from gqa.scheduling.presets import preset
from tests.builders import pending, running, snapshot

POLICY = preset("gqa")


def cluster(*pools):
    """pools: (type, spot, count, price)"""
    gpus, i = [], 0
    for gpu_type, spot, count, price in pools:
        for _ in range(count):
            gpus.append(Gpu(i, gpu_type, price=price, spot=spot))
            i += 1
    return tuple(gpus)


MIXED = cluster(("a10g", False, 2, 1.0), ("a10g", True, 2, 0.4))  # 0-1 on demand, 2-3 spot


@pytest.mark.parametrize("job, gpus", [
    pytest.param(pending("s", spot=True), (2,), id="spot-tolerant: spot first"),
    pytest.param(pending("s", spot=True, reclaims=2), (0,), id="after 2 reclaims: on demand first"),
    pytest.param(pending("o"), (0,), id="not spot-tolerant: on demand only"),
    pytest.param(pending("g", spot=True, gpus=2), (2, 3), id="a gang stays in one pool"),
])
def test_pool_choice(job, gpus):
    [start] = plan(snapshot(MIXED, policy=POLICY, pending=[job])).starts
    assert start.gpus == gpus


def test_spot_full_falls_back_to_on_demand_before_the_reclaim_limit():
    jobs = [pending(f"s{i}", spot=True, seq=i, submitted_at=i) for i in range(3)]
    starts = {s.job_id: s.gpus for s in plan(snapshot(MIXED, policy=POLICY, pending=jobs)).starts}
    assert starts == {"s0": (2,), "s1": (3,), "s2": (0,)}


ON_DEMAND_BUSY = [running(f"od{i}", gpus=(i,), started_at=0.0, wall_time=3_600.0) for i in range(2)]
SPOT_BUSY = [running(f"sp{i}", gpus=(2 + i,), started_at=0.0, wall_time=3_600.0) for i in range(2)]


@pytest.mark.parametrize("reclaims, busy, gpus", [
    pytest.param(2, ON_DEMAND_BUSY, (2,), id="past the limit, on demand full, spot free: spot"),
    pytest.param(7, ON_DEMAND_BUSY, (2,), id="far past the limit: still spot before waiting"),
    pytest.param(2, ON_DEMAND_BUSY + SPOT_BUSY, None, id="both full: waits"),
    pytest.param(0, ON_DEMAND_BUSY, (2,), id="under the limit: spot first anyway"),
])
def test_a_job_reclaimed_too_often_takes_spot_when_on_demand_is_full(reclaims, busy, gpus):
    """A job past `spot_fallback_after` reclaims prefers on demand but does not wait for it while
    spot GPUs stand free: a mix's small on demand would fill up with such jobs, queued behind
    each other, and their JCT grow without bound."""
    job = pending("late", spot=True, reclaims=reclaims, submitted_at=10.0)
    result = plan(snapshot(MIXED, policy=POLICY, pending=[job], running=busy, now=60.0))
    assert {s.job_id: s.gpus for s in result.starts}.get("late") == gpus


def test_a_job_reclaimed_too_often_still_prefers_free_on_demand_to_free_spot():
    jobs = [pending(f"f{i}", spot=True, reclaims=2, seq=i, submitted_at=i) for i in range(3)]
    starts = {s.job_id: s.gpus for s in plan(snapshot(MIXED, policy=POLICY, pending=jobs)).starts}
    assert starts == {"f0": (0,), "f1": (1,), "f2": (2,)}


HOUR = 3600.0


@pytest.mark.parametrize("job, first", [
    pytest.param(pending("j", spot=True, reclaims=1), True, id="1 reclaim, no run: spot first"),
    pytest.param(pending("j", spot=True, reclaims=2), False, id="2 reclaims, no run: on demand first"),
    pytest.param(pending("j", spot=True, reclaims=2, served=3.9 * HOUR), False, id="2 in 3.9 h: on demand first"),
    pytest.param(pending("j", spot=True, reclaims=2, served=4 * HOUR), True, id="2 in 4 h: spot first"),
    pytest.param(pending("j", spot=True, reclaims=5, served=15 * HOUR), False, id="5 in 15 h: on demand first"),
    pytest.param(pending("j", spot=True, reclaims=5, served=16 * HOUR), True, id="5 in 16 h: spot first"),
    pytest.param(pending("j", spot=True, gpus=8, reclaims=2, served=8 * 3.9 * HOUR), False,
                 id="a gang's hours are its GPU time over its GPUs"),
    pytest.param(pending("j", spot=True, gpus=8, reclaims=2, served=8 * 4 * HOUR), True, id="8 GPUs, 4 h each"),
    pytest.param(pending("j", reclaims=0, served=100 * HOUR), False, id="not spot-tolerant: never"),
])
def test_spot_stays_first_for_a_job_reclaimed_rarely_for_how_long_it_runs(job, first):
    """A reclaim costs the work since the last save: a job that runs for days is reclaimed a few
    times even where spot is calm, and moving it to on demand would cost far more than that."""
    assert spot_first(job, POLICY) is first
    assert POLICY.spot_fallback_after == 2 and SPOT_HOURS_PER_RECLAIM == 4.0   # the rows' numbers


def test_a_long_job_reclaimed_a_few_times_stays_on_spot_in_a_pass():
    long_run = pending("long", spot=True, reclaims=3, served=30 * HOUR)
    quick_losses = pending("quick", spot=True, reclaims=3, served=1 * HOUR, seq=1)
    starts = {s.job_id: s.gpus for s in plan(snapshot(MIXED, policy=POLICY, pending=[long_run, quick_losses])).starts}
    assert starts == {"long": (2,), "quick": (0,)}


def test_a_job_that_may_not_use_spot_is_told_why_it_waits_beside_free_spot_gpus():
    result = plan(snapshot(MIXED, policy=POLICY, pending=[pending("od")], running=ON_DEMAND_BUSY, now=60.0))
    assert result.waiting["od"] == ("needs 1 GPU, 0 free on demand; 2 free on spot, which its spec does not "
                                    "allow (spot: false)")
    both_busy = plan(snapshot(MIXED, policy=POLICY, pending=[pending("od")], running=ON_DEMAND_BUSY + SPOT_BUSY,
                              now=60.0))
    assert both_busy.waiting["od"] == "needs 1 GPU, 0 free"
    # spot could not hold it either: nothing to say about spot
    gang = plan(snapshot(MIXED, policy=POLICY, pending=[pending("od", gpus=3)], running=ON_DEMAND_BUSY, now=60.0))
    assert gang.waiting["od"] == ("needs 3 GPUs, 0 free; the queue has 2 in all, so it cannot start until it has "
                                  "more (gqa update od --gpus N, or gqa cancel od)")


def test_a_gang_never_spans_pools():
    result = plan(snapshot(MIXED, policy=POLICY, pending=[pending("g", spot=True, gpus=3)]))
    assert result.starts == [] and result.waiting["g"] == (
        "needs 3 GPUs, 4 free, at most 2 in one pool; the queue has 2 in one pool, so it cannot start until it has "
        "more (gqa update g --gpus N, or gqa cancel g)")


def test_on_demand_only_job_on_a_spot_only_cluster_says_why():
    spot_only = cluster(("a10g", True, 2, 0.4))
    result = plan(snapshot(spot_only, policy=POLICY, pending=[pending("o")]))
    assert result.waiting["o"] == "needs 1 GPU on demand; this cluster has only spot capacity for them"


def test_several_acceptable_types():
    inventory = cluster(("h100", False, 1, 4.0), ("l4", False, 1, 0.8))
    result = plan(snapshot(inventory, policy=POLICY, pending=[pending("a", gpu_types=("a10g", "l4"))]))
    assert [s.gpus for s in result.starts] == [(1,)]
    result = plan(snapshot(inventory, policy=POLICY, pending=[pending("a", gpu_types=("a10g", "v100"))]))
    assert "none of that type" in result.waiting["a"]
