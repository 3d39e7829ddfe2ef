"""The Unix accounts a shared box's jobs run as, and the private files each
job gets: its log and its checkpoint directory belong to the job's user,
readable by nobody else (root and the daemon read them as root).

Files are created through an open file descriptor (O_NOFOLLOW, then fchown
and fchmod on that descriptor), never by path after a check: a symlink or a
directory someone planted where a job's file goes is refused, not followed."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ...models.errors import NotFound


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]     # every group the user is in, the primary one included (for extra_groups)
    home: str

    @classmethod
    def for_user(cls, name: str) -> "Account":
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise NotFound(f"there is no Unix user named {name!r} on this machine") from None
        return cls._of(entry)

    @classmethod
    def for_uid(cls, uid: int) -> "Account":
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            raise NotFound(f"uid {uid} has no user name on this machine") from None
        return cls._of(entry)

    @classmethod
    def _of(cls, entry: pwd.struct_passwd) -> "Account":
        groups = tuple(dict.fromkeys(os.getgrouplist(entry.pw_name, entry.pw_gid)))
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)

    def group_names(self) -> frozenset[str]:
        names = set()
        for gid in self.groups:
            try:
                names.add(grp.getgrgid(gid).gr_name)
            except KeyError:      # a gid with no name names no role
                pass
        return frozenset(names)

    def popen_identity(self) -> dict:
        """subprocess.Popen's user/group/extra_groups to run as this account
        (only a root daemon may switch; a daemon that runs as the user needs none)."""
        if os.geteuid() != 0:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


def own_file(path: Path | str, account: Account, mode: int = 0o600) -> BinaryIO:
    """Open `path` for appending, created if absent, owned by `account` with
    `mode`. Returns the open file (binary, append), e.g. for a job's stdout."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                 mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):     # a planted FIFO or device
            raise PermissionError(f"{path} is not a regular file")
        _own(fd, account, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "ab")
    except BaseException:
        os.close(fd)
        raise


def own_dir(path: Path | str, account: Account, mode: int = 0o700) -> None:
    """Create directory `path` (if absent) owned by `account` with `mode`."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _own(fd, account, mode)
    finally:
        os.close(fd)


def _own(fd: int, account: Account, mode: int) -> None:
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (account.uid, account.gid):
        os.fchown(fd, account.uid, account.gid)     # PermissionError unless root: the caller's to report
    os.fchmod(fd, mode)                             # after chown, which may clear set-id bits


def unknown_groups(names: list[str]) -> list[str]:
    """The names in `names` that name no Unix group here."""
    missing = []
    for name in names:
        try:
            grp.getgrnam(name)
        except KeyError:
            missing.append(name)
    return missing
