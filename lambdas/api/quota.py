"""The quota and cost routes. They read the settings afresh (Wiring.settings):
a change shows at once in the next `gqa quota show` or `gqa cost`."""

from __future__ import annotations

from typing import Any

from gqa import settings_codec
from gqa.http import wire
from gqa.services.access import Action, authorize
from gqa.services.quota import wire_members
from lambdas.api.container import container, logger
from lambdas.api.request import app, body, caller, query


@app.get("/quota")
def quota() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    return wire.quota_to_dict(container().quota().show())


@app.put("/quota/teams/<team>")
def set_team(team: str) -> dict[str, Any]:
    authorize(caller(), Action.SET_QUOTA)
    changes = wire.changes_from_dict(body(), wire.TEAM_CHANGES)
    policy = container().quota().set(team, **changes)
    logger.info("team quota set", extra={"team": team, "changes": changes})
    return {"team": team, "policy": settings_codec.team_policy_to_dict(policy)}


@app.put("/quota/teams/<team>/members")
def set_members(team: str) -> dict[str, Any]:
    authorize(caller(), Action.SET_QUOTA)
    members = wire_members(body())
    listed = container().quota().set_members(team, members)
    logger.info("team members set", extra={"team": team, "members": list(listed)})
    return {"team": team, "members": list(listed)}


@app.put("/quota/policy")
def set_policy() -> dict[str, Any]:
    authorize(caller(), Action.SET_POLICY)
    changes = wire.changes_from_dict(body(), wire.POLICY_CHANGES)
    policy = container().quota().set_policy(**changes)
    logger.info("queue policy set", extra={"changes": {k: str(v) for k, v in changes.items()}})
    return settings_codec.policy_to_dict(policy)


@app.get("/cost")
def cost() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    report = container().cost().report(period=query("period"), team=query("team"), gpu_hours=True,
                                       jobs=wire.cost_jobs(query("jobs")))
    return wire.cost_to_dict(report)
