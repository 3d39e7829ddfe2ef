"""The queue's settings (inventory, policy, a team's policy) as JSON-ready
dicts and back: one codec for the stores that keep them, the daemon that
reads its inventory from the command line and the HTTP contract
(`gqa/http/wire.py`) that answers them, so a policy written by one reads back
the same in any other. Pure: objects in, dicts (or JSON text) out.

It sits beside the ports: it imports the models, the scheduler's settings
and `ports.Inventory`; adapters, services, the HTTP contract and the entry
points may import it. Readers ignore fields they do not know (a newer
writer's), and turn JSON's lists back into the tuples the settings hold."""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace
from typing import Any

from .ports import Inventory
from .scheduling.snapshot import Gpu, Policy, TeamPolicy, Weights


def inventory_to_dict(inventory: Inventory) -> dict[str, Any]:
    return asdict(inventory)


def inventory_from_dict(data: dict[str, Any]) -> Inventory:
    """Read as inventory_to_dict or inventory_json wrote it (runs of alike GPUs, where given, win)."""
    if "runs" in data:
        gpus = tuple(Gpu(run["first"] + i, run["type"], run["price"], run["spot"])
                     for run in data["runs"] for i in range(run["count"]))
    else:
        gpus = tuple(Gpu(**g) for g in data["gpus"])
    return Inventory(gpus=gpus, cpus=data.get("cpus"), memory=data.get("memory"))


# An inventory is stored as runs of alike GPUs with consecutive indices, a few bytes a pool however
# many GPUs it holds: stored GPU by GPU, an AWS deployment's thousands took megabytes in its
# template (CloudFormation takes 1 MB) and its settings item (DynamoDB: 400 KB). An inventory of
# at most LISTED_GPUS is stored GPU by GPU as well, as gqa read it before runs: a daemon or
# function still running an earlier gqa while the settings are rewritten reads it as it did.
LISTED_GPUS = 512


def _runs(gpus: tuple[Gpu, ...]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for gpu in gpus:
        last = runs[-1] if runs else None
        if last is not None and (last["type"], last["price"], last["spot"]) == (gpu.type, gpu.price, gpu.spot) \
                and last["first"] + last["count"] == gpu.index:
            last["count"] += 1
        else:
            runs.append({"first": gpu.index, "count": 1, "type": gpu.type, "price": gpu.price, "spot": gpu.spot})
    return runs


def team_policy_to_dict(policy: TeamPolicy) -> dict[str, Any]:
    return asdict(policy)


def team_policy_from_dict(data: dict[str, Any]) -> TeamPolicy:
    return TeamPolicy(**_known(TeamPolicy, data))


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    return asdict(policy)


def policy_from_dict(data: dict[str, Any]) -> Policy:
    values = _known(Policy, data)
    values["weights"] = Weights(**data["weights"])
    values["default_team"] = team_policy_from_dict(data["default_team"])
    return Policy(**values)


def _known(kind: type, data: dict[str, Any]) -> dict[str, Any]:
    """The fields `kind` has, lists as tuples (JSON has none: preempt_tiers, budget_alerts)."""
    known = {f.name for f in fields(kind)}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}


# the stores keep each setting as one JSON text
def inventory_json(inventory: Inventory) -> str:
    stored: dict[str, Any] = {"runs": _runs(inventory.gpus), "cpus": inventory.cpus, "memory": inventory.memory}
    if len(inventory.gpus) <= LISTED_GPUS:
        stored["gpus"] = inventory_to_dict(inventory)["gpus"]
    return json.dumps(stored)


def inventory_from(raw: str) -> Inventory:
    return inventory_from_dict(json.loads(raw))


# A stored policy says which defaults its weights were written under. Before version 2 the
# whole policy was kept whenever an admin set any of it, with the defaults of the time, and the
# duration weight could not be set at all: a weight a version-1 policy holds at its version-1
# default was never chosen (the duration weight always), so it reads as today's default, while a
# weight an admin set to something else is kept.
WEIGHTS_VERSION = 2
VERSION_1_DEFAULT_WEIGHTS = Weights(fair_share=1.0, age=0.25, size=0.0, duration=1.0)


def policy_json(policy: Policy) -> str:
    return json.dumps({**policy_to_dict(policy), "weights_version": WEIGHTS_VERSION})


def policy_from(raw: str) -> Policy:
    data = json.loads(raw)
    policy = policy_from_dict(data)
    if data.get("weights_version", 1) >= WEIGHTS_VERSION:
        return policy
    old, today = asdict(VERSION_1_DEFAULT_WEIGHTS), asdict(Weights())
    chosen = {name: value for name, value in asdict(policy.weights).items() if value != old[name]}
    return replace(policy, weights=Weights(**{**today, **chosen}))
