"""A submission's team is a right, not a label: the submitter must be one of
its members (access.team_for), read from the store where the deployment
file or `gqa quota set TEAM --members` put them. Every path that makes a
job for someone checks it before anything is written: the API's and the
shared daemon's submissions, `gqa submit` served by the daemon, a new
trigger (the team it resolves to is kept in the trigger's spec), and each
burst of a trigger when it closes (services/triggers.py: its owner may have
left the team since)."""

from __future__ import annotations

from typing import Protocol

from ..models.spec import JobSpec
from .access import Principal, team_for


class Members(Protocol):
    """The part of the JobStore this needs."""

    def team_members(self) -> dict[str, tuple[str, ...]]: ...


def for_team(store: Members, spec: JobSpec, caller: Principal) -> JobSpec:
    """The spec for the team `caller` may submit it for (the one it names, or
    the caller's own when it names none); NotPermitted with the reason."""
    team = team_for(caller, spec.team, store.team_members())
    return spec if team == spec.team else spec.model_copy(update={"team": team})
