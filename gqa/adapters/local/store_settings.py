"""The local store's settings (inventory, policy, teams and their members, in
meta and teams) and its usage ledger (decayed GPU-seconds and spend per team)."""

from __future__ import annotations

import json

from ...models.errors import Conflict
from ...ports import Inventory
from ...scheduling.budget import period_of
from ...scheduling.fairshare import decay, with_running
from ...scheduling.snapshot import Policy, TeamPolicy
from ...settings_codec import inventory_from, inventory_json, policy_from, policy_json
from .sqlite_db import SqliteDatabase

_TEAM_COLUMNS = "share, max_gpus, max_gpus_per_user, budget, stop_at_budget"
_REVISION, _TEAM = "revision of ", "team#"   # meta's key of a setting's revision: "revision of team#nlp"


def _team_policy(row: tuple) -> TeamPolicy:
    return TeamPolicy(share=row[0], max_gpus=row[1], max_gpus_per_user=row[2], budget=row[3],
                      stop_at_budget=bool(row[4]))


class SqliteSettings(SqliteDatabase):
    """Settings and the usage ledger, each write one transaction."""

    def _set_meta(self, key: str, value: str) -> None:
        with self._tx():
            self.db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                            (key, value))

    def inventory(self) -> Inventory | None:
        raw = self._meta("inventory")
        if raw is None:
            return None
        return inventory_from(raw)

    def set_inventory(self, inventory: Inventory) -> None:
        self._set_meta("inventory", inventory_json(inventory))

    def policy(self) -> Policy:
        raw = self._meta("policy")
        if raw is None:
            return Policy()
        return policy_from(raw)

    def current_policy(self) -> tuple[Policy, int]:
        revision = self._revision_of("policy")   # first: a write between the reads then fails the guard
        return self.policy(), revision

    def set_policy(self, policy: Policy, *, revision: int | None = None) -> None:
        with self._tx():
            self._next_revision("policy", revision, "the queue policy")
            self._set_meta("policy", policy_json(policy))

    def teams(self) -> dict[str, TeamPolicy]:
        rows = self.db.execute(f"SELECT team, {_TEAM_COLUMNS} FROM teams").fetchall()
        return {r[0]: _team_policy(r[1:]) for r in rows}

    def current_team(self, team: str) -> tuple[TeamPolicy | None, int]:
        revision = self._revision_of(_TEAM + team)   # first, as current_policy's
        row = self.db.execute(f"SELECT {_TEAM_COLUMNS} FROM teams WHERE team = ?", (team,)).fetchone()
        return (None if row is None else _team_policy(row)), revision

    def set_team(self, team: str, policy: TeamPolicy, *, revision: int | None = None) -> None:
        with self._tx():
            self._next_revision(_TEAM + team, revision, f"team {team}'s quota")
            # the members are set on their own (set_team_members): a quota change keeps them
            self.db.execute("INSERT INTO teams (team, share, max_gpus, max_gpus_per_user, budget, stop_at_budget) "
                            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(team) DO UPDATE SET "
                            "share = excluded.share, max_gpus = excluded.max_gpus, "
                            "max_gpus_per_user = excluded.max_gpus_per_user, budget = excluded.budget, "
                            "stop_at_budget = excluded.stop_at_budget",
                            (team, policy.share, policy.max_gpus, policy.max_gpus_per_user, policy.budget,
                             int(policy.stop_at_budget)))

    def team_members(self) -> dict[str, tuple[str, ...]]:
        rows = self.db.execute("SELECT team, members FROM teams WHERE members IS NOT NULL").fetchall()
        return {team: tuple(json.loads(members)) for team, members in rows if json.loads(members)}

    def set_team_members(self, team: str, members: tuple[str, ...]) -> None:
        """Replace the team's members; a team not configured yet gets the default policy with them."""
        default = self.policy().default_team
        with self._tx():
            self._next_revision(_TEAM + team, None, f"team {team}")   # it may configure the team
            self.db.execute("INSERT INTO teams (team, share, max_gpus, max_gpus_per_user, budget, stop_at_budget, "
                            "members) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(team) DO UPDATE SET "
                            "members = excluded.members",
                            (team, default.share, default.max_gpus, default.max_gpus_per_user, default.budget,
                             int(default.stop_at_budget), json.dumps(list(members)) if members else None))

    # Each setting a read-modify-write changes (the policy, a team) has a revision in meta, moved on by
    # every write of it, that the write compares with the one its caller read (Settings.current_*).
    def _revision_of(self, name: str) -> int:
        return int(self._meta(_REVISION + name) or 0)

    def _next_revision(self, name: str, expected: int | None, what: str) -> None:
        """Inside a write's transaction: Conflict if the setting is no longer at `expected` (None: any)."""
        stored = self._revision_of(name)
        if expected is not None and stored != expected:
            raise Conflict(f"{what} changed since it was read")
        self._set_meta(_REVISION + name, str(stored + 1))

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        rows = self.db.execute("SELECT team, gpu_seconds, as_of FROM usage").fetchall()
        out = {team: decay(value, now - as_of, half_life) for team, value, as_of in rows}
        return with_running(out, self.db.execute(
            "SELECT team, gpus, started_at FROM jobs WHERE state = 'RUNNING' AND started_at IS NOT NULL"), now)

    def _add_usage(self, team: str, gpu_seconds: float, now: float, half_life: float) -> None:
        with self._tx():
            row = self.db.execute("SELECT gpu_seconds, as_of FROM usage WHERE team = ?", (team,)).fetchone()
            value = decay(row[0], now - row[1], half_life) if row else 0.0
            self.db.execute("INSERT INTO usage VALUES (?, ?, ?) ON CONFLICT(team) DO UPDATE SET "
                            "gpu_seconds = excluded.gpu_seconds, as_of = excluded.as_of",
                            (team, value + gpu_seconds, now))

    def spend(self, period: str) -> dict[str, float]:
        return dict(self.db.execute("SELECT team, amount FROM spend WHERE period = ?", (period,)).fetchall())

    def _charge(self, team: str, change_at: float, cost: float, usage: float, half_life: float | None) -> float | None:
        """Add a change's cost and usage to its team's ledger, inside the change's transaction;
        the policy's half-life, read once per transaction (pass back what this returns)."""
        if cost:
            self.db.execute("INSERT INTO spend VALUES (?, ?, ?) ON CONFLICT(team, period) DO UPDATE SET "
                            "amount = amount + excluded.amount", (team, period_of(change_at), cost))
        if usage:
            if half_life is None:
                half_life = self.policy().half_life
            self._add_usage(team, usage, change_at, half_life)
        return half_life
