"""A pools file: what it reads, and every value it refuses with the pool's number."""

import re

import pytest

from gqa.sim.pools import MAX_GPUS, Pool, PoolError, load_pools

OD = "{name: od, gpu_type: a100, spot: false, gpus: 2, price_per_gpu_hour: 4.1}"
KEYS = " (a pool's keys: name, gpu_type, spot, gpus, price_per_gpu_hour, reclaim_rate_per_hour)"


def test_reads_pools_in_order_with_defaults():
    pools = load_pools(f"- {OD}\n- {{name: sp, gpu_type: a100, spot: true, gpus: 4.0, price_per_gpu_hour: 1,"
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
     f"gpus must be at most {MAX_GPUS:,}, the most a replay may have, got {MAX_GPUS + 1}"),
    # YAML 1.1 read `yes` as true: a pools file is read by YAML 1.2's core schema, as job files are
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: yes}", "spot must be true or false, got 'yes'"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: on}", "spot must be true or false, got 'on'"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, spot: true, reclaim_rate_per_hour: false}",
     "reclaim_rate_per_hour must be a number from 0 to 10, got False"),
    ("{name: , gpus: 2, price_per_gpu_hour: 1}", "name must be a name, got None"),   # was the pool 'None'
    ("{name: ' ', gpus: 2, price_per_gpu_hour: 1}", "name must be a name, got ' '"),
    ("{name: a, gpu_type: [a100], gpus: 2, price_per_gpu_hour: 1}", "gpu_type must be a name, got ['a100']"),
    ("{name: a, gpus: 2}", "missing price_per_gpu_hour"),
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, zone: b}", "unknown zone" + KEYS),
    # keys that are not text: sorting them with the names raised TypeError
    ("{name: od, gpus: 8, price_per_gpu_hour: 4.1, 0.5}", "unknown 0.5" + KEYS),   # a value without its key
    ("{name: a, gpus: 2, price_per_gpu_hour: 1, zone: b, 4: x, null: y, true: z}",
     "unknown zone, 4, None, True" + KEYS),
    ("{name: 2026-12-07, gpus: 2, price_per_gpu_hour: 1}", "name must be a name, got datetime.date(2026, 12, 7)"),
    ("[a, b]", "expected a mapping with name, gpu_type, spot, gpus, price_per_gpu_hour"),
])
def test_refuses_a_bad_value_naming_its_pool_and_line(pool, message):
    with pytest.raises(PoolError, match="^" + re.escape(f"pools.yaml: line 3: pool 2: {message}") + "$"):
        load_pools(f"# two pools\n- {OD}\n- {pool}\n", "pools.yaml")


def test_the_bound_holds_over_all_pools_together():
    half = MAX_GPUS // 2
    assert sum(p.gpus for p in load_pools(f"- {{name: a, gpus: {half}, price_per_gpu_hour: 1}}\n"
                                          f"- {{name: b, gpus: {MAX_GPUS - half}, price_per_gpu_hour: 1, spot: true}}\n"
                                          )) == MAX_GPUS
    with pytest.raises(PoolError, match=f"pool 2: the pools hold {MAX_GPUS + 1:,} GPUs"):
        load_pools(f"- {{name: a, gpus: {half}, price_per_gpu_hour: 1}}\n"
                   f"- {{name: b, gpus: {MAX_GPUS - half + 1}, price_per_gpu_hour: 1, spot: true}}\n")


@pytest.mark.parametrize("text, message", [
    ("", "pools: expected a list of pools"),
    (f"- {OD}\n- {OD}\n", "pools: line 2: pool 2: duplicate name 'od'"),
    (f"pools:\n  - {OD}\n\n  - {{name: b, gpus: 1}}\n", "pools: line 4: pool 2: missing price_per_gpu_hour"),
    ("- {name: a, gpus: 1,\n   price_per_gpu_hour: x, zone: 1}\n", "pools: line 1: pool 1: unknown zone"),
    ("pools: {name: a, gpus: 1, price_per_gpu_hour: 1}\n", "pools: expected a list of pools"),
    # what PyYAML raises past its own errors (ValueError, RecursionError) was a traceback; its own
    # errors ran over several lines
    ("a: [", "pools: line 1: malformed YAML: expected the node content, but found '<stream end>'"),
    (f"- {OD}\n---\n- {OD}\n", "pools: line 2: malformed YAML: expected a single document in the stream, but "
                                "found another document"),
    ("- {name: a, gpus: 1, price_per_gpu_hour: 1, added: 2026-13-45}", "pools: line 1: invalid timestamp "
                                                                       "'2026-13-45': month must be in 1..12"),
    ("- {name: a, gpus: !!int x, price_per_gpu_hour: 1}", "pools: line 1: invalid int 'x'"),
    # an int of 400 digits has no float (math.isfinite() raised OverflowError), one of 5,000 no int
    ("- {name: a, gpus: 1" + "0" * 400 + ", price_per_gpu_hour: 1}",
     "pools: line 1: number '10000000000000000000000000000000000000000000000000000000... is longer than 64 "
     "characters; quote it to make it text"),
    ("- {name: a, gpus: 1, ? [x]: 1, price_per_gpu_hour: 1}", "pools: line 1: malformed YAML: found unhashable key"),
    ("[" * 5000 + "]" * 5000, "pools: line 1: nested deeper than 32 levels"),
    ("# a NUL\n- {name: a\x00}", "pools: line 2: malformed YAML: character U+0000 is not allowed"),
    # YAML 1.1 kept the last of a key given twice: a pool of 8 GPUs was read as one of 64
    ("- {name: a, gpus: 8, price_per_gpu_hour: 1}\n- name: b\n  gpus: 8\n  price_per_gpu_hour: 1\n  gpus: 64\n",
     "pools: line 5: duplicate key 'gpus' (first at line 3)"),
    (f"pools:\n  - {OD}\npools:\n  - {OD}\n", "pools: line 3: duplicate key 'pools' (first at line 1)"),
])
def test_refuses_a_bad_file_in_one_line(text, message):
    with pytest.raises(PoolError, match="^" + re.escape(message)) as refused:
        load_pools(text)
    assert "\n" not in str(refused.value)
