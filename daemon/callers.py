"""Who is calling the daemon: the Unix user the socket's peer credentials
name, with the roles the box gives them (gqa.services.access.LocalAccess):
root and the user who runs the daemon administer the queue, and so do
members of the admin groups named at `gqa local start --system`; members of
the approver groups approve and deny."""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import replace
from pathlib import Path

from gqa.adapters.local.accounts import Account
from gqa.adapters.local.system import read_system
from gqa.models.errors import NotFound, NotPermitted
from gqa.services.access import LocalAccess, Principal, Role


def local_access(home: Path | str) -> LocalAccess:
    """The roles of the queue at `home`: its marker's groups (a system queue),
    plus root and the daemon's own user."""
    settings = read_system(home)
    admins = {name for name in (_name(0), _name(os.geteuid())) if name is not None}
    return LocalAccess(admins=frozenset(admins),
                       admin_groups=frozenset(settings.admin_groups if settings else ()),
                       approver_groups=frozenset(settings.approver_groups if settings else ()))


def principal_for(uid: int, gid: int, policy: LocalAccess) -> Principal:
    """The caller behind peer credentials (uid, gid); NotPermitted for a uid
    with no user name here (a job's owner must be a user the box can run as)."""
    try:
        account = Account.for_uid(uid)
    except NotFound as exc:
        raise NotPermitted(f"{exc}; the queue serves users of this machine") from None
    groups = set(account.group_names())
    try:
        groups.add(grp.getgrgid(gid).gr_name)    # the group the caller runs under now (newgrp, sg)
    except KeyError:
        pass
    return policy.principal(account.name, groups)


def owner_principal(uid: int, gid: int) -> Principal:
    """The caller of a single-user queue, whom requests.py admits only as its
    owner or root: its administrator."""
    return replace(principal_for(uid, gid, LocalAccess()), roles=frozenset({Role.ADMIN}))


def _name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None
