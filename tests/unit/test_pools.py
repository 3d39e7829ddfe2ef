"""Pools: a GPU type bought spot or on demand. Spot first for spot-tolerant
jobs, on demand after repeated reclaims; a gang never spans pools."""

import pytest

from gqa.scheduling import Gpu, plan
from gqa.scheduling.presets import preset
from tests.builders import pending, snapshot

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
    pytest.param(pending("s", spot=True, reclaims=2), (0,), id="after 2 reclaims: on demand"),
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


def test_a_gang_never_spans_pools():
    result = plan(snapshot(MIXED, policy=POLICY, pending=[pending("g", spot=True, gpus=3)]))
    assert result.starts == [] and result.waiting["g"] == "needs 3 GPUs, 4 free, at most 2 in one pool"


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
