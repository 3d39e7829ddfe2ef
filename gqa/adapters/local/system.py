"""Where a local queue lives, and how its home is laid out.

Two kinds of home:
- a user's own (`gqa local start` as that user; ~/.gqa by default): the
  directory is 0700 and everything in it the user's, so nobody else reads
  the database (which holds each job's environment), the logs or the
  checkpoints;
- a system queue for a team (`gqa local start --system`, root; /var/lib/gqa
  by default): the home holds a `system` marker, and only the daemon (root)
  reads the database. Users reach it through its socket alone, which is why
  the socket is the one file everyone may open; each job's log file and
  checkpoint directory belong to the job's user (accounts.py), in
  directories others may pass through (0711) but not list.

Which home a command uses (state_home): GQA_HOME when set; else ~/.gqa when it
exists; else /var/lib/gqa when it holds a system queue; else ~/.gqa."""

from __future__ import annotations

import json
import os
import pwd
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...models.errors import SpecError

MARKER = "system"
SYSTEM_HOME = Path("/var/lib/gqa")
DB = "gqa.db"                    # as StatePaths names it
PRIVATE_DIRS = ("exits",)        # root's alone
PASSABLE_DIRS = ("logs", "checkpoints")   # entries owned by each job's user; nobody may list them


@dataclass(frozen=True)
class SystemSettings:
    """What the marker file holds: the Unix groups whose members administer the
    queue or approve jobs (root and the daemon's user always administer it)."""

    admin_groups: tuple[str, ...] = ()
    approver_groups: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({"admin_groups": list(self.admin_groups),
                           "approver_groups": list(self.approver_groups)}) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str = MARKER) -> "SystemSettings":
        try:
            raw = json.loads(text) if text.strip() else {}
        except ValueError:
            raise SpecError("is not JSON; expected {\"admin_groups\": [...], \"approver_groups\": [...]}",
                            source=source) from None
        if not isinstance(raw, dict):
            raise SpecError("must be a JSON object", source=source)
        lists = []
        for key in ("admin_groups", "approver_groups"):
            value = raw.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise SpecError(f"{key} must be a list of group names", source=source)
            lists.append(tuple(value))
        return cls(*lists)


def read_system(home: Path | str) -> SystemSettings | None:
    """The settings of the system queue at `home`; None for a user's own home."""
    marker = Path(home) / MARKER
    try:
        text = marker.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return SystemSettings.from_json(text, source=str(marker))


def is_system(home: Path | str) -> bool:
    return (Path(home) / MARKER).is_file()


def state_home(given: Mapping[str, str] | None = None) -> Path:
    """The home a command uses (see the module's docstring)."""
    env = os.environ if given is None else given
    if env.get("GQA_HOME"):
        return Path(env["GQA_HOME"]).absolute()
    personal = Path(env.get("HOME") or os.path.expanduser("~")) / ".gqa"
    if personal.exists():
        return personal.absolute()
    if is_system(SYSTEM_HOME):
        return SYSTEM_HOME
    return personal.absolute()


def socket_mode(home: Path | str) -> int:
    """The mode of the daemon's command socket: everyone's on a system queue
    (each request is authorised by its peer credentials), else the user's."""
    return 0o666 if is_system(home) else 0o600


# -- laying homes out --------------------------------------------------------------------------

def private_home(home: Path | str, *, tighten: bool = False) -> None:
    """A user's own home: created 0700; with `tighten` (a daemon about to start
    there), an existing one the user owns is made 0700 (homes made before this
    rule were world-readable), and one another user owns is refused."""
    home = Path(home)
    home.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(home, 0o700)
        return
    except FileExistsError:
        pass
    st = home.stat()
    if tighten and st.st_uid != os.geteuid() and not is_system(home):
        # its daemon would run that user's jobs as us, and leave files in it they cannot read
        owner = user_name(st.st_uid)
        raise SpecError(f"{home} is the queue of {owner}, not yours: start its daemon as {owner} "
                        f"(sudo -u {owner} gqa local start), or choose another GQA_HOME; a queue for "
                        "every user of this machine is `gqa local start --system`, which lays out its own home")
    if tighten and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(home, 0o700)


def user_name(uid: int) -> str:
    """The user's name, or `uid N` where the machine has none for it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def lay_out_system(home: Path | str, settings: SystemSettings) -> None:
    """Create or repair a system queue's home (root only): home 0755 root, the
    marker 0644, the database and exits root's alone, logs and checkpoints 0711.
    The daemon runs under umask 077, so what it creates later is root's alone too."""
    home = Path(home)
    if os.geteuid() != 0:
        raise PermissionError("a system queue is laid out by root")
    home.parent.mkdir(parents=True, exist_ok=True)
    _root_dir(home, 0o755)
    for name in PRIVATE_DIRS:
        _root_dir(home / name, 0o700)
    for name in PASSABLE_DIRS:
        _root_dir(home / name, 0o711)
    for suffix in ("", "-wal", "-shm"):  # a database already there (the daemon, under umask 077, makes new ones 0600)
        if (home / (DB + suffix)).exists():
            _root_file(home / (DB + suffix), 0o600)
    _root_file(home / MARKER, 0o644, settings.to_json().encode())


def _root_dir(path: Path, mode: int) -> None:
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != 0 and any(os.scandir(fd)):
            # someone else's directory with things in it: taking it over would keep what they put there
            raise SpecError(f"{path} belongs to uid {st.st_uid} and is not empty; a system queue's "
                            "directories must be root's (choose another --home, or remove it)")
        os.fchown(fd, 0, 0)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _root_file(path: Path, mode: int, content: bytes | None = None) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    fd = os.open(path, flags | (os.O_TRUNC if content is not None else 0), mode)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError(f"{path} is not a regular file")
        os.fchown(fd, 0, 0)
        os.fchmod(fd, mode)
        if content is not None:
            os.write(fd, content)
    finally:
        os.close(fd)
