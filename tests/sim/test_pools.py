"""A pools file: what it reads, and every value it refuses with the pool's number."""

import re

import pytest

from gqa.sim.pools import MAX_GPUS, Pool, PoolError, load_pools

OD = "{name: od, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 4.1}"


def test_reads_pools_in_order_with_defaults():
    pools = load_pools(f"- {OD}\n- {{name: sp, gpu_type: a100, spot: yes, gpus: 4.0, price_per_gpu_hour: 1,"
                       " reclaim_rate_per_hour: 0.5}\n- {name: h100, gpus: 1, price_per_gpu_hour: 0}\n"
                       "- {name: 4090, gpus: 1, price_per_gpu_hour: 0.3, reclaim_rate_per_hour: null}\n")
    assert pools == [Pool("od", "a100", False, 2, 4.1), Pool("sp", "a100", True, 4, 1.0, 0.5),
                     Pool("h100", "h100", False, 1, 0.0), Pool("4090", "4090", False, 1, 0.3)]
    assert load_pools(f"pools:\n  - {OD}\n") == pools[:1]


@pytest.mark.parametrize("pool, message", [
    # YAML's .nan and .inf are floats: a NaN price made every cost nan, an infinite reclaim rate
    # reclaimed each start at once and the replay never ended
    ("{name: a, gpus: 2, price_per_gpu_hour: .nan}", "price_per_gpu_hour must be a finite number >= 0, got nan"),
    ("{name: a, gpus: 2, price_per_gpu_hour: .inf}", "price_per_gpu_hour must be a finite number >= 0, got inf"),
    ("{name: a, gpus: 2, price_per_gpu_hour: -1}", "price_per_gpu_hour must be a finite number >= 0, got -1"),
    ("{name: a, gpus: 2, price_per_gpu_hour: cheap}", "price_per_gpu_hour must be a finite number >= 0, got 'cheap'"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: true, reclaim_rate_per_hour: .inf}",
     "reclaim_rate_per_hour must be a number from 0 to 10, got inf"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: true, reclaim_rate_per_hour: 11}",
     "reclaim_rate_per_hour must be a number from 0 to 10, got 11"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: true, reclaim_rate_per_hour: -0.1}",
     "reclaim_rate_per_hour must be a number from 0 to 10, got -0.1"),
    # int(4.5) is 4 and int(True) is 1: read silently, the cluster was not the one written
    ("{name: a, gpus: 4.5, price_per_gpu_hour: 1}", "gpus must be a whole number >= 1, got 4.5"),
    ("{name: a, gpus: true, price_per_gpu_hour: 1}", "gpus must be a whole number >= 1, got True"),
    ("{name: a, gpus: .inf, price_per_gpu_hour: 1}", "gpus must be a whole number >= 1, got inf"),
    ("{name: a, gpus: 0, price_per_gpu_hour: 1}", "gpus must be a whole number >= 1, got 0"),
    ("{name: a, gpus: '4', price_per_gpu_hour: 1}", "gpus must be a whole number >= 1, got '4'"),
    # bool('no') is True: a quoted no was a spot pool
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: 'no'}", "spot must be true or false, got 'no'"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: 1}", "spot must be true or false, got 1"),
    (f"{{name: a, gpus: {MAX_GPUS + 1}, price_per_gpu_hour: 1}}",
     f"the pools hold {MAX_GPUS + 3:,} GPUs, over the {MAX_GPUS:,} a replay may have"),   # od's 2 and these
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: true, reclaim_rate_per_hour: false}",
     "reclaim_rate_per_hour must be a number from 0 to 10, got False"),
    ("{name: , gpus: 2, price_per_gpu_hour: 1}", "name must be a name, got None"),   # was the pool 'None'
    ("{name: ' ', gpus: 2, price_per_gpu_hour: 1}", "name must be a name, got ' '"),
    ("{name: a, gpu_type: [a100], gpus: 2, price_per_gpu_hour: 1}", "gpu_type must be a name, got ['a100']"),
    ("{name: a, gpus: 2}", "missing price_per_gpu_hour"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, zone: b}", "unknown zone"),
    ("[a, b]", "expected a mapping with name, gpu_type, spot, gpus, price_per_gpu_hour"),
])
def test_refuses_a_bad_value_naming_its_pool(pool, message):
    with pytest.raises(PoolError, match="^" + re.escape(f"pools.yaml: pool 2: {message}") + "$"):
        load_pools(f"- {OD}\n- {pool}\n", "pools.yaml")


def test_the_bound_holds_over_all_pools_together():
    half = MAX_GPUS // 2
    assert sum(p.gpus for p in load_pools(f"- {{name: a, gpus: {half}, price_per_gpu_hour: 1}}\n"
                                          f"- {{name: b, gpus: {MAX_GPUS - half}, price_per_gpu_hour: 1, spot: true}}\n"
                                          )) == MAX_GPUS
    with pytest.raises(PoolError, match=f"pool 2: the pools hold {MAX_GPUS + 1:,} GPUs"):
        load_pools(f"- {{name: a, gpus: {half}, price_per_gpu_hour: 1}}\n"
                   f"- {{name: b, gpus: {MAX_GPUS - half + 1}, price_per_gpu_hour: 1, spot: true}}\n")


@pytest.mark.parametrize("text, message", [
    ("", "expected a list of pools"),
    ("a: [", "not YAML"),
    (f"- {OD}\n- {OD}\n", "pool 2: duplicate name 'od'"),
])
def test_refuses_a_bad_file(text, message):
    with pytest.raises(PoolError, match=message):
        load_pools(text)
