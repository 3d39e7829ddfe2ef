"""Who may do what: the access rule of the API, pure (an identity and an
action in, allowed or NotPermitted out).

Identity -> owner. API Gateway checks the SigV4 signature (AWS_IAM
authorisation) and hands over the caller's ARN; the owner of what the caller
submits, and the name their quotas count under, follows from it:

- IAM user `arn:aws:iam::A:user/path/alice` -> `alice` (user names are unique
  in an account whatever their path).
- Assumed role `arn:aws:sts::A:assumed-role/Role/session` -> `Role/session`.
  Whoever may assume a role chooses the session name, so it alone proves
  nothing: namespaced under the role, "alice" in role Researcher can never pass
  for the IAM user alice (no user name holds a '/'). Every session of one role
  is one principal to IAM, so per-user GPU caps for such roles count per
  session name; give people their own identities (users, or Identity Center).
- Assumed role whose name matches one of `identity_roles` (role-name patterns,
  e.g. `AWSReservedSSO_*` for IAM Identity Center permission sets, whose
  session name AWS sets to the signed-in user's name) -> the session name.
- Federated user `arn:aws:sts::A:federated-user/name` -> `federated-user/name`
  (the name is chosen by whoever called GetFederationToken).
- The account's root user is refused: it is not meant for daily work.

A name with characters a job spec's owner may not hold (',' in a role
session, say) keeps the valid ones, with the rest as '_' and a short digest of
the original appended, so two names never fold into one.

Roles: every authenticated caller is an owner (submits, reads the queue,
cancels, requeues, holds, releases and updates their own jobs, reads their
own jobs' output, adds triggers, lists everyone's, removes their own);
approvers also approve and deny; admins may do everything. A job's output is its owner's and the
admins' alone: it may hold what the job printed of its data or credentials,
and approving a job's size needs none of it. Who is an approver or an admin comes from the deployment's access
settings (`AccessPolicy.from_json`): patterns matched (shell-style, `*`) on
the caller's ARN when they start with `arn:`, else on the owner name.

Teams are rights: a job runs for a team its submitter belongs to (team_for).
Members are the same kind of patterns, plus `@group` for a Unix group on the
local backend; they come from the deployment file (AWS) or `gqa quota set
TEAM --members` and are read from the store, so the api function's
environment stays small. Admins may act for any team."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Protocol

from ..models.errors import NotAuthenticated, NotPermitted
from ..models.spec import NAME_RE, OWNER_RE

_INVALID = re.compile(r"[^A-Za-z0-9._@+=/-]")
MAX_OWNER = 129
DEFAULT_TEAM = "default"      # what a spec that names no team says (JobSpec.team's default)
MEMBERS_SHOWN = 8             # members a refusal lists before "and N more"


class Action(StrEnum):
    SUBMIT = "submit jobs"
    READ = "read the queue"
    CANCEL = "cancel"
    REQUEUE = "requeue"
    HOLD = "hold"
    RELEASE = "release"
    UPDATE = "update"
    APPROVE = "approve"
    DENY = "deny"
    SET_QUOTA = "set team quotas"
    SET_POLICY = "set the queue policy"
    READ_LOGS = "read a job's output"
    ADD_TRIGGER = "add triggers"
    READ_TRIGGERS = "list triggers"
    REMOVE_TRIGGER = "remove"


class Role(StrEnum):
    APPROVER = "approver"
    ADMIN = "admin"


ANYONE = frozenset({Action.SUBMIT, Action.READ, Action.ADD_TRIGGER, Action.READ_TRIGGERS})
# the owner's, or an admin's: what the action touches, as named in a refusal
OWNED = {Action.CANCEL: "job", Action.REQUEUE: "job", Action.HOLD: "job", Action.RELEASE: "job", Action.UPDATE: "job",
         Action.READ_LOGS: "job", Action.REMOVE_TRIGGER: "trigger"}
APPROVALS = frozenset({Action.APPROVE, Action.DENY})        # approvers and admins
ADMIN_ONLY = frozenset({Action.SET_QUOTA, Action.SET_POLICY})


class Owned(Protocol):
    """What an owner-or-admin action touches: a job record, a trigger."""

    @property
    def id(self) -> str: ...

    @property
    def owner(self) -> str: ...


@dataclass(frozen=True)
class Principal:
    """A caller whose identity API Gateway verified."""

    owner: str
    arn: str
    account: str = ""
    roles: frozenset[Role] = frozenset()
    groups: frozenset[str] = frozenset()     # Unix groups (local backend): what `@group` members match
    # the team a caller listed in no team's members submits for; None: such callers may not submit
    unlisted_team: str | None = DEFAULT_TEAM

    @property
    def admin(self) -> bool:
        return Role.ADMIN in self.roles

    @property
    def approver(self) -> bool:
        return Role.APPROVER in self.roles or self.admin


@dataclass(frozen=True)
class AccessPolicy:
    admins: tuple[str, ...] = ()
    approvers: tuple[str, ...] = ()
    identity_roles: tuple[str, ...] = ()    # role-name patterns whose session names AWS sets (not the caller)
    unlisted_team: str | None = DEFAULT_TEAM

    @classmethod
    def from_json(cls, text: str | None) -> "AccessPolicy":
        """`{"admins": [...], "approvers": [...], "identity_roles": [...],
        "unlisted_team": "default" | null}`, each list of patterns; empty or
        missing: no approvers, no admins, callers in no team use "default".
        ValueError names what is wrong, so a bad setting fails the cold start."""
        if not text or not text.strip():
            return cls()
        try:
            raw = json.loads(text)
        except ValueError:
            raise ValueError("the access settings are not JSON") from None
        if not isinstance(raw, dict):
            raise ValueError("the access settings must be a JSON object")
        unknown = set(raw) - {"admins", "approvers", "identity_roles", "unlisted_team"}
        if unknown:
            raise ValueError(f"unknown access setting(s) {', '.join(sorted(unknown))}; "
                             "use admins, approvers, identity_roles, unlisted_team")
        unlisted = raw.get("unlisted_team", DEFAULT_TEAM)
        if unlisted is not None and not (isinstance(unlisted, str) and NAME_RE.match(unlisted)):
            raise ValueError(f"access setting unlisted_team must be a team name or null, got {unlisted!r}")
        lists = {}
        for key in ("admins", "approvers", "identity_roles"):
            value = raw.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                raise ValueError(f"access setting {key} must be a list of non-empty strings")
            lists[key] = tuple(v.strip() for v in value)
        return cls(**lists, unlisted_team=unlisted)

    def principal(self, arn: str | None, account: str | None = None) -> Principal:
        """The caller behind a verified ARN, with their roles."""
        if not arn:
            raise NotAuthenticated("the request carries no IAM identity: sign it with SigV4 "
                                   "(the gqa API uses AWS_IAM authorisation)")
        owner = owner_from_arn(arn, self.identity_roles)
        return Principal(owner=owner, arn=arn, account=account or _account_of(arn), roles=self.roles_of(arn, owner),
                         unlisted_team=self.unlisted_team)

    def named(self, owner: str) -> Principal:
        """A caller known by owner name alone, without an ARN API Gateway verified
        (the owner of a trigger stored before its ARN was kept): patterns that
        name ARNs match nothing of theirs, so they are judged by name patterns only."""
        return Principal(owner=owner, arn="", roles=self.roles_of("", owner), unlisted_team=self.unlisted_team)

    def roles_of(self, arn: str, owner: str) -> frozenset[Role]:
        roles = set()
        if _matches(self.admins, arn, owner):
            roles.add(Role.ADMIN)
        if _matches(self.approvers, arn, owner):
            roles.add(Role.APPROVER)
        return frozenset(roles)


@dataclass(frozen=True)
class LocalAccess:
    """Who is who on one machine's shared queue: the caller is the Unix user
    the socket's peer credentials name (the kernel vouches, as API Gateway
    does for an ARN); admins are the users in `admins` (root, the daemon's
    user) and members of `admin_groups`, approvers members of `approver_groups`.
    The rules of what each may do are authorize()'s, the same as on AWS; a
    user in no team's members submits for the default team."""

    admins: frozenset[str] = frozenset()
    admin_groups: frozenset[str] = frozenset()
    approver_groups: frozenset[str] = frozenset()
    unlisted_team: str | None = DEFAULT_TEAM

    def principal(self, user: str, groups: Iterable[str] = ()) -> Principal:
        groups = set(groups)
        roles = set()
        if user in self.admins or groups & self.admin_groups:
            roles.add(Role.ADMIN)
        if groups & self.approver_groups:
            roles.add(Role.APPROVER)
        return Principal(owner=user, arn=f"unix:{user}", roles=frozenset(roles), groups=frozenset(groups),
                         unlisted_team=self.unlisted_team)


def _matches(patterns: Iterable[str], arn: str, owner: str) -> bool:
    return any(fnmatchcase(arn if p.startswith("arn:") else owner, p) for p in patterns)


def owner_from_arn(arn: str, identity_roles: Iterable[str] = ()) -> str:
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or not parts[5]:
        raise NotPermitted(f"cannot tell who {arn!r} is: not an IAM ARN")
    service, resource = parts[2], parts[5]
    kind, _, rest = resource.partition("/")
    if service == "iam" and resource == "root":
        raise NotPermitted("the account's root user may not use gqa; call it as an IAM user or role")
    if service == "iam" and kind == "user" and rest:
        return _owner_name(rest.rsplit("/", 1)[-1])
    if service == "sts" and kind == "assumed-role":
        role, _, session = rest.partition("/")
        if role and session:
            if any(fnmatchcase(role, p) for p in identity_roles):
                return _owner_name(session)
            return _owner_name(f"{role}/{session}")
    if service == "sts" and kind == "federated-user" and rest:
        return _owner_name(f"federated-user/{rest}")
    raise NotPermitted(f"cannot tell who {arn!r} is: expected an IAM user, an assumed role or a federated user")


def _owner_name(name: str) -> str:
    if OWNER_RE.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    cleaned = _INVALID.sub("_", name).lstrip("._@+=/-")[: MAX_OWNER - 9] or "user"
    return f"{cleaned}-{digest}"


def _account_of(arn: str) -> str:
    parts = arn.split(":", 5)
    return parts[4] if len(parts) == 6 else ""


def sees_private(principal: Principal, thing: Owned) -> bool:
    """May the caller see what `thing` keeps private (a trigger's job
    environment, which may hold secrets)? Its owner and admins may."""
    return principal.admin or thing.owner == principal.owner


def authorize(principal: Principal, action: Action, owned: Iterable[Owned] = ()) -> None:
    """Allowed, or NotPermitted saying who may. `owned`: what the action
    touches (the jobs to cancel, the trigger to remove), every one checked
    before anything changes."""
    if action in ANYONE:
        return
    if action in OWNED:
        if principal.admin:
            return
        for thing in owned:
            if thing.owner != principal.owner:
                raise NotPermitted(_not_theirs(principal, action, thing))
        return
    if action in APPROVALS:
        if not principal.approver:
            raise NotPermitted(f"{principal.owner} may not {action} jobs: approvers and admins do "
                               "(ask an admin of this queue to add you to the approvers)")
        return
    if action in ADMIN_ONLY:
        if not principal.admin:
            raise NotPermitted(f"{principal.owner} may not {action}: only admins may")
        return
    raise NotPermitted(f"unknown action {action!r}")


def _not_theirs(principal: Principal, action: Action, thing: Owned) -> str:
    noun = OWNED[action]
    if action is Action.READ_LOGS:
        return (f"job {thing.id} belongs to {thing.owner}; {principal.owner} may not read its output "
                "(a job's output may hold secrets: its owner and admins read it)")
    return (f"{noun} {thing.id} belongs to {thing.owner}; {principal.owner} may not {action} it "
            f"(owners {action} their own {noun}s; admins may {action} any)")


def is_member(principal: Principal, members: Iterable[str]) -> bool:
    """Does a team's member list name the caller? `@group`: a Unix group the
    caller is in; `arn:...`: their ARN; else their owner name (shell-style *)."""
    for pattern in members:
        if pattern.startswith("@"):
            if pattern[1:] in principal.groups:
                return True
        elif fnmatchcase(principal.arn if pattern.startswith("arn:") else principal.owner, pattern):
            return True
    return False


def teams_of(principal: Principal, members: Mapping[str, Iterable[str]]) -> list[str]:
    """The teams whose members name the caller, by name."""
    return sorted(team for team, listed in members.items() if is_member(principal, listed))


def team_for(principal: Principal, named: str, members: Mapping[str, Sequence[str]]) -> str:
    """The team a submission by `principal` runs for, or NotPermitted saying
    why and what to do. `named`: the spec's team (DEFAULT_TEAM when it names
    none); `members`: each team's member patterns (teams with none are left out).

    A named team must be one of the caller's, or any for admins; a caller in
    no team may name the unlisted team. Naming no team means the caller's only
    team; with several they must name one; with none, the unlisted team (or,
    for an admin, the default)."""
    mine = teams_of(principal, members)
    if named != DEFAULT_TEAM or named in mine:
        if named in mine or principal.admin or (not mine and named == principal.unlisted_team):
            return named
        raise NotPermitted(_not_member(principal, named, tuple(members.get(named, ())), mine))
    if len(mine) == 1:
        return mine[0]
    if mine:
        raise NotPermitted(f"{principal.owner} is a member of teams {', '.join(mine)}: name the team the job runs "
                           "for (`team:` in the spec, or --team)")
    if principal.unlisted_team is not None:
        return principal.unlisted_team
    if principal.admin:
        return DEFAULT_TEAM
    raise NotPermitted(f"{principal.owner} is a member of no team ({_teams_text(members)}), and this queue "
                       "admits jobs only for its teams' members; ask an admin to add you to a team")


def _not_member(principal: Principal, team: str, listed: Sequence[str], mine: list[str]) -> str:
    if team == principal.unlisted_team and not listed and mine:
        return (f"team {team} is for users in no team; {principal.owner} is a member of {', '.join(mine)} "
                "and submits for those")
    if listed:
        shown = ", ".join(listed[:MEMBERS_SHOWN]) + (f" and {len(listed) - MEMBERS_SHOWN} more"
                                                     if len(listed) > MEMBERS_SHOWN else "")
        why = f"{principal.owner} is not a member of team {team} (members: {shown})"
    else:
        why = f"team {team} lists no members, so only admins may submit for it; {principal.owner} is not an admin"
    if mine:
        return f"{why}; your teams: {', '.join(mine)}; ask an admin to add you"
    if principal.unlisted_team is not None:
        return f"{why}; submit for team {principal.unlisted_team} (the team of users in no team), " \
               "or ask an admin to add you"
    return f"{why}; ask an admin to add you"


def _teams_text(members: Mapping[str, Sequence[str]]) -> str:
    names = sorted(members)
    if not names:
        return "no team lists members"
    return "teams: " + ", ".join(names[:MEMBERS_SHOWN]) + (f" and {len(names) - MEMBERS_SHOWN} more"
                                                            if len(names) > MEMBERS_SHOWN else "")


def roles_text(principal: Principal) -> list[str]:
    """The caller's roles, owner first, for `whoami`."""
    return ["owner"] + [r.value for r in (Role.APPROVER, Role.ADMIN) if r in principal.roles]
