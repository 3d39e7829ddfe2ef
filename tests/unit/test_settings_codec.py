"""The settings' one codec (gqa.settings_codec): every store, the daemon and
the HTTP contract read back what any of them wrote."""

import json

import pytest

from gqa import settings_codec as codec
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu, Policy, TeamPolicy, Weights

INVENTORIES = {
    "one GPU, no limits": Inventory(gpus=(Gpu(0),)),
    "two pools with prices": Inventory(gpus=(Gpu(0, "a10g", 1.2), Gpu(1, "l4", 0.8, spot=True)), cpus=16,
                                       memory=64 << 30),
    "no GPUs": Inventory(gpus=()),
    "gaps and a price change inside a type": Inventory(gpus=(Gpu(0, "a10g", 1.2), Gpu(1, "a10g", 1.2),
                                                              Gpu(3, "a10g", 1.2), Gpu(4, "a10g", 1.5))),
    "an AWS deployment's thousands": Inventory(gpus=tuple(Gpu(i, "a100", 4.1, spot=i >= 4096) for i in range(8192))),
}
POLICIES = {
    "the defaults": Policy(),
    "every field changed": Policy(weights=Weights(3.0, 0.1, 0.2, 0.0), half_life=3600.0, max_gpus_per_job=8,
                                  default_team=TeamPolicy(share=2.0, budget=100.0), preempt_tiers=(1, 2),
                                  approval_cost=50.0, budget_alerts=(75.0, 100.0), alert_pending_after=None,
                                  idle_gpu_window=0.0),
    "nothing preemptible, no alerts": Policy(preempt_tiers=(), budget_alerts=()),
}
TEAMS = {
    "the defaults": TeamPolicy(),
    "capped, with a budget that stops": TeamPolicy(3.0, 16, 4, 1000.0, stop_at_budget=True),
}


def through_json(data):
    """What a store or an HTTP body keeps: JSON text, where tuples become lists."""
    return json.loads(json.dumps(data))


@pytest.mark.parametrize("inventory", INVENTORIES.values(), ids=INVENTORIES.keys())
def test_an_inventory_round_trips(inventory):
    assert codec.inventory_from_dict(through_json(codec.inventory_to_dict(inventory))) == inventory
    assert codec.inventory_from(codec.inventory_json(inventory)) == inventory


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
def test_a_policy_round_trips_with_its_tuples(policy):
    back = codec.policy_from_dict(through_json(codec.policy_to_dict(policy)))
    assert back == policy
    assert isinstance(back.preempt_tiers, tuple) and isinstance(back.budget_alerts, tuple)
    assert codec.policy_from(codec.policy_json(policy)) == policy


def stored_before_version_2(policy: Policy) -> str:
    """A policy as a store kept it before the weights' defaults changed: no version."""
    return json.dumps(codec.policy_to_dict(policy))


@pytest.mark.parametrize("stored, weights", [
    pytest.param(stored_before_version_2(Policy(weights=codec.VERSION_1_DEFAULT_WEIGHTS, max_gpus_per_job=8)),
                 Weights(), id="the old defaults, never chosen: today's"),
    pytest.param(stored_before_version_2(Policy(weights=Weights(2.0, 0.25, 0.0, 1.0))),
                 Weights(2.0, Weights().age, 0.0, Weights().duration),
                 id="a weight an admin chose before is kept, the others take today's"),
    pytest.param(stored_before_version_2(Policy(weights=Weights(1.0, 0.5, 0.1, 1.0))),
                 Weights(1.0, 0.5, 0.1, Weights().duration), id="the duration weight could not be chosen before"),
    pytest.param(codec.policy_json(Policy(weights=codec.VERSION_1_DEFAULT_WEIGHTS)),
                 codec.VERSION_1_DEFAULT_WEIGHTS, id="the old defaults chosen since: kept"),
])
def test_a_stored_weight_that_was_never_chosen_takes_todays_default(stored, weights):
    policy = codec.policy_from(stored)
    assert policy.weights == weights
    assert policy.max_gpus_per_job == json.loads(stored)["max_gpus_per_job"]   # the rest as stored


@pytest.mark.parametrize("team", TEAMS.values(), ids=TEAMS.keys())
def test_a_team_policy_round_trips(team):
    assert codec.team_policy_from_dict(through_json(codec.team_policy_to_dict(team))) == team


def test_fields_a_newer_writer_added_are_ignored():
    policy = POLICIES["every field changed"]
    data = through_json(codec.policy_to_dict(policy))
    data["a_later_setting"] = 3
    data["default_team"]["a_later_cap"] = 1
    assert codec.policy_from_dict(data) == policy


def test_an_inventory_is_stored_as_runs_of_alike_gpus_and_a_small_one_gpu_by_gpu_too():
    # GPU by GPU, 8,192 GPUs took 650 KB in a deployment's template and settings item, past
    # DynamoDB's 400 KB item; a small inventory is also listed whole, as an earlier gqa reads it
    thousands = codec.inventory_json(INVENTORIES["an AWS deployment's thousands"])
    assert len(thousands) < 300 and "gpus" not in json.loads(thousands)
    assert [r["count"] for r in json.loads(thousands)["runs"]] == [4096, 4096]
    small = json.loads(codec.inventory_json(INVENTORIES["two pools with prices"]))
    assert codec.inventory_from_dict({"gpus": small["gpus"], "cpus": 16, "memory": 64 << 30}) == \
        INVENTORIES["two pools with prices"]


def test_an_inventory_without_cpus_or_memory_reads_as_unlimited():
    """The daemon's --inventory may leave them out."""
    assert codec.inventory_from('{"gpus": [{"index": 0, "type": "virtual"}]}') == Inventory(gpus=(Gpu(0, "virtual"),))
