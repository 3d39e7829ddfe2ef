"""The DynamoDB store's settings (one partition: inventory, policy, each team
with its members) and its usage ledger (another: decayed usage and spend in
shards, ledger.py)."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from ... import settings_codec
from ...ports import Inventory
from ...scheduling.fairshare import with_running
from ...scheduling.snapshot import Policy, TeamPolicy
from . import items as it
from . import ledger
from . import tables as t
from .guarded import write_once
from .store_base import MEMBERS, TEAM_PREFIX, List, S
from .store_live import DynamoDBLive


_RUNNING = frozenset({S.RUNNING.value})


class DynamoDBSettings(DynamoDBLive):
    """Settings are read as one Query, kept `settings_ttl` seconds (and once per pass)."""

    # -- settings -------------------------------------------------------------------
    def _settings_items(self) -> dict[str, dict[str, Any]]:
        """The settings partition, sk -> item: one Query for inventory, policy and teams."""
        if self._pass is not None and self._pass.settings is not None:
            return self._pass.settings
        found = self._settings.get(lambda: {i[t.SK]: i for i in self._query(
            self.tables.settings, {t.PK: t.SETTING}, consistent=True)})
        if self._pass is not None:
            self._pass.settings = found
        return found

    def _put_setting(self, name: str, attributes: dict[str, Any]) -> None:
        self.call("PutItem", TableName=self.tables.settings, Item=setting_item(name, attributes))
        self._settings.clear()
        if self._pass is not None:
            self._pass.settings = None

    def inventory(self) -> Inventory | None:
        item = self._settings_items().get("inventory")
        return settings_codec.inventory_from(item["json"]) if item else None

    def set_inventory(self, inventory: Inventory) -> None:
        self._put_setting(*inventory_setting(inventory))

    def policy(self) -> Policy:
        item = self._settings_items().get("policy")
        return settings_codec.policy_from(item["json"]) if item else Policy()

    def current_policy(self) -> tuple[Policy, int]:
        item = self._setting("policy")
        return (settings_codec.policy_from(item["json"]) if item else Policy()), _revision(item)

    def set_policy(self, policy: Policy, *, revision: int | None = None) -> None:
        _, attributes = policy_setting(policy)
        expr = it.Expr()
        self._update_setting("policy", _updated(attributes, (), expr), expr, revision)

    def teams(self) -> dict[str, TeamPolicy]:
        return {sk.removeprefix(TEAM_PREFIX): it.team_policy(item)
                for sk, item in self._settings_items().items() if sk.startswith(TEAM_PREFIX)}

    def current_team(self, team: str) -> tuple[TeamPolicy | None, int]:
        item = self._setting(TEAM_PREFIX + team)
        return (it.team_policy(item) if item else None), _revision(item)

    def set_team(self, team: str, policy: TeamPolicy, *, revision: int | None = None) -> None:
        # the whole policy, in place: the item's members (set_team_members, the deploy) stay
        given = it.team_attributes(policy)
        expr = it.Expr()
        update = _updated(given, [f.name for f in fields(TeamPolicy) if f.name not in given], expr)
        self._update_setting(TEAM_PREFIX + team, update, expr, revision)

    def team_members(self) -> dict[str, tuple[str, ...]]:
        return {sk.removeprefix(TEAM_PREFIX): tuple(item[MEMBERS]) for sk, item in self._settings_items().items()
                if sk.startswith(TEAM_PREFIX) and item.get(MEMBERS)}

    def set_team_members(self, team: str, members: tuple[str, ...]) -> None:
        """Replace the team's members; a team not configured yet gets the default policy with them."""
        expr = it.Expr()
        # if_not_exists: a new team item carries the default policy, an existing one keeps its own
        defaults = [f"{expr.n(k)} = if_not_exists({expr.n(k)}, {expr.v(v)})"
                    for k, v in it.team_attributes(self.policy().default_team).items()]
        if members:
            update = "SET " + ", ".join([f"{expr.n(MEMBERS)} = {expr.v(list(members))}", *defaults])
        else:
            update = "SET " + ", ".join(defaults) + f" REMOVE {expr.n(MEMBERS)}"
        self._update_setting(TEAM_PREFIX + team, f"{update} ADD {expr.n(t.REVISION)} {expr.v(1)}", expr)

    def _setting(self, name: str) -> dict[str, Any] | None:
        """The settings item `name` as stored now (a read-modify-write's read: never the kept copy)."""
        out = self.call("GetItem", TableName=self.tables.settings, ConsistentRead=True,
                        Key=it.dump({t.PK: t.SETTING, t.SK: name}))
        return it.load(out["Item"]) if "Item" in out else None

    def _update_setting(self, name: str, update: str, expr: it.Expr, revision: int | None = None) -> None:
        """UpdateItem on the settings item; with `revision`, only while the item is still at it
        (0: an item not written yet, or last written before revisions were kept), else Conflict."""
        request: dict[str, Any] = {"TableName": self.tables.settings, "UpdateExpression": update,
                                   "Key": it.dump({t.PK: t.SETTING, t.SK: name})}
        try:
            if revision is None:
                self.call("UpdateItem", **request, **expr.kwargs())
            else:   # a retry that meets this write applied is told it was, not Conflict (guarded.py)
                request["ConditionExpression"] = (f"attribute_not_exists({expr.n(t.REVISION)})" if revision == 0
                                                  else f"{expr.n(t.REVISION)} = {expr.v(revision)}")
                write_once(self.call, "UpdateItem", **request, **expr.kwargs())
        finally:   # written or refused, what this store kept of the settings may be stale
            self._settings.clear()
            if self._pass is not None:
                self._pass.settings = None

    # -- the ledger ----------------------------------------------------------------------
    def _ledger(self, prefix: str) -> List[dict[str, Any]]:
        """The ledger items whose sort key starts with `prefix` (in a pass: one read of the partition)."""
        if self._pass is not None:
            if self._pass.ledger is None:
                self._pass.ledger = builtins.list(self._query(self.tables.ledger, {t.PK: ledger.PARTITION}))
            return [i for i in self._pass.ledger if i[t.SK].startswith(prefix)]
        expr = it.Expr()
        return builtins.list(self._query(self.tables.ledger, {t.PK: ledger.PARTITION},
                                         sort=(f"begins_with({expr.n(t.SK)}, {expr.v(prefix)})", expr)))

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        """Decayed GPU-seconds per team. Charges decay with the half-life they were
        recorded under (ledger.py); the services pass that same policy half-life."""
        out: dict[str, float] = {}
        for item in self._ledger(ledger.USAGE):
            team = item["team"]
            out[team] = out.get(team, 0.0) + ledger.decayed(
                float(item["total"]), float(item["epoch"]), float(item["half_life"]), now)
        return with_running(out, ((i[t.TEAM], int(i["gpus"]), float(i["started_at"]))
                                  for i in self.live_items(_RUNNING) if i.get("started_at") is not None), now)

    def spend(self, period: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for item in self._ledger(ledger.spend_prefix(period)):   # a team's shards (ledger.py), summed
            out[item["team"]] = out.get(item["team"], 0.0) + float(item["amount"])
        return out


# -- the settings items, as stored: the store writes them, and a deployment writes
# its pools, policy and teams with the same functions (infra/registration.py)
def setting_item(name: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """The settings item `name` in DynamoDB's JSON form (PutItem's Item)."""
    return it.dump({t.PK: t.SETTING, t.SK: name, **attributes})


def inventory_setting(inventory: Inventory) -> tuple[str, dict[str, Any]]:
    return "inventory", {"json": settings_codec.inventory_json(inventory)}


def policy_setting(policy: Policy) -> tuple[str, dict[str, Any]]:
    return "policy", {"json": settings_codec.policy_json(policy)}


def setting_update(name: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """UpdateItem's arguments (DynamoDB's JSON) that leave the settings item `name` holding
    `attributes`, as setting_item's PutItem would, and move its revision on: what a deploy
    writes, so that a `gqa quota` change read before it is refused and applied again on top."""
    expr = it.Expr()
    removed = [k for k in (*(f.name for f in fields(TeamPolicy)), MEMBERS)
               if name.startswith(TEAM_PREFIX) and k not in attributes]
    return {"Key": it.dump({t.PK: t.SETTING, t.SK: name}), "UpdateExpression": _updated(attributes, removed, expr),
            **expr.kwargs()}


def _updated(attributes: dict[str, Any], removed: Iterable[str], expr: it.Expr) -> str:
    """An UpdateExpression setting `attributes`, removing `removed`, moving the revision on."""
    sets = ", ".join(f"{expr.n(k)} = {expr.v(v)}" for k, v in attributes.items())
    gone = ", ".join(expr.n(k) for k in removed)
    return f"SET {sets}" + (f" REMOVE {gone}" if gone else "") + f" ADD {expr.n(t.REVISION)} {expr.v(1)}"


def _revision(item: dict[str, Any] | None) -> int:
    return int(item.get(t.REVISION, 0)) if item else 0


def team_setting(team: str, policy: TeamPolicy, members: Iterable[str] = ()) -> tuple[str, dict[str, Any]]:
    """A team's item: its policy and, when it lists any, its members (what
    the api function checks a submission's team against; they are kept here,
    not in the functions' environment, which Lambda limits to 4 KB)."""
    members = builtins.list(members)
    return TEAM_PREFIX + team, {**it.team_attributes(policy), **({MEMBERS: members} if members else {})}
