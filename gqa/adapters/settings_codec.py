"""The queue's settings (inventory, policy) as JSON: every store keeps them
the same way, so a policy written by one backend reads back in another."""

import json
from dataclasses import asdict

from ..ports import Inventory
from ..scheduling.snapshot import Gpu, Policy, TeamPolicy, Weights


def inventory_json(inventory: Inventory) -> str:
    return json.dumps(asdict(inventory))


def inventory_from(raw: str) -> Inventory:
    data = json.loads(raw)
    return Inventory(gpus=tuple(Gpu(**g) for g in data["gpus"]), cpus=data.get("cpus"), memory=data.get("memory"))


def policy_json(policy: Policy) -> str:
    return json.dumps(asdict(policy))


def policy_from(raw: str) -> Policy:
    data = json.loads(raw)
    data["weights"] = Weights(**data["weights"])
    data["default_team"] = TeamPolicy(**data["default_team"])
    if "preempt_tiers" in data:  # JSON has no tuples
        data["preempt_tiers"] = tuple(data["preempt_tiers"])
    if "budget_alerts" in data:
        data["budget_alerts"] = tuple(data["budget_alerts"])
    return Policy(**data)
