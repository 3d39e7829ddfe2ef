"""Every process an attempt starts ends with the attempt.

A process group is not enough: anything a job starts with setsid, setpgid or
a double fork leaves it and would outlive the job while its GPU goes to the
next one. Each attempt gets a *cell*, and kill(cell) reaches every process
in it, wherever it moved:

- `CgroupContainment`: the cell is a cgroup v2 directory. The launcher's
  wrapper writes its own pid into `$GQA_CGROUP_PROCS` before anything else
  (or the daemon calls place()), every descendant is born inside and cannot
  leave without privilege; kill() writes `cgroup.kill` (or freezes and
  SIGKILLs what `cgroup.procs` lists, before Linux 5.14). Memory and CPU
  limits are enforced when those controllers can be enabled.
- `SubreaperContainment`: no writable cgroup v2. The daemon becomes a child
  subreaper, so orphans of a job re-parent to it instead of init, and every
  process of a cell inherits the marker `GQA_CELL=<name>.<token>` in its
  environment; kill() finds the marked processes among the daemon's
  descendants (or, for a cell of an earlier daemon, in all of /proc). A
  process that clears its environment after its parent died escapes it.

Both put the marker in Cell.env, so the cgroup kind can fall back to it for a
cell whose directory is gone (a daemon restarted from another cgroup).
choose_containment() picks one at the daemon's start."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Protocol

from .paths import StatePaths

CELL_VAR = "GQA_CELL"
PROCS_VAR = "GQA_CGROUP_PROCS"
LIMIT_CONTROLLERS = ("memory", "cpu")
CPU_PERIOD_US = 100_000
PR_SET_CHILD_SUBREAPER = 36
KILL_DEADLINE_S = 2.0      # kill() gives up on processes that will not die (D state) after this
RELEASE_DEADLINE_S = 1.0   # release() waits this long for the killed to leave the cgroup
PROC = Path("/proc")


@dataclass(frozen=True)
class Cell:
    """One attempt's container. The name is stable (job id and attempt), so
    cell() rebuilds the same Cell after a daemon restart."""
    name: str
    env: dict[str, str] = field(default_factory=dict)   # added to the job's environment by the launcher


class Containment(Protocol):
    kind: str   # "cgroup" | "subreaper"

    def describe(self) -> str: ...
    def prepare(self, job_id: str, attempt: int, *, cpus: int | None, memory: int | None) -> Cell: ...
    def cell(self, job_id: str, attempt: int) -> Cell: ...
    def place(self, cell: Cell, pid: int) -> None: ...
    def kill(self, cell: Cell) -> None: ...
    def oom_killed(self, cell: Cell) -> bool: ...
    def release(self, cell: Cell) -> None: ...
    def reap_strays(self, keep: Collection[int]) -> int: ...
    def close(self) -> None: ...


def cell_name(job_id: str, attempt: int) -> str:
    """"12_3", 2 -> "12_3.2"; anything that is no safe file name character becomes "_"."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{job_id}.{attempt}")


def instance_token(instance: str) -> str:
    """Short and stable per queue (the lead passes GQA_HOME): two queues on
    one machine never share a marker or a cgroup, and a restarted daemon
    rebuilds the markers of its predecessor's cells."""
    return hashlib.blake2b(instance.encode(), digest_size=6).hexdigest()


# -- cgroup v2 -----------------------------------------------------------------------------
class CgroupContainment:
    """Cells are the child directories of `root`, a cgroup v2 directory (or,
    for tests, any directory laid out like one). `controllers` are those
    enabled for the cells ("memory", "cpu"); `has_kill` whether cgroup.kill
    exists (Linux >= 5.14)."""

    kind = "cgroup"

    def __init__(self, root: Path | str, *, instance: str = "", controllers: Collection[str] = (),
                 has_kill: bool | None = None, note: str = "", slow_moves: str = ""):
        self.root = Path(root)
        self.slow_moves = slow_moves   # what each start costs when the mount does not favour moves
        self.token = instance_token(instance)
        self.controllers = frozenset(controllers)
        self.has_kill = (self.root / "cgroup.kill").exists() if has_kill is None else has_kill
        self.note = note   # why limits are not enforced, for describe()

    def describe(self) -> str:
        how = "kill" if self.has_kill else "freeze and SIGKILL"
        enforced = [c for c in LIMIT_CONTROLLERS if c in self.controllers]
        missing = [c for c in LIMIT_CONTROLLERS if c not in self.controllers]
        limits = []
        if enforced:
            limits.append(f"{' and '.join(enforced)} limits enforced")
        if missing:
            limits.append(f"{' and '.join(missing)} limits not enforced: {self.note or 'controllers unavailable'}")
        return f"containment: cgroup v2 at {self.root} ({how}); {'; '.join(limits)}{self.slow_moves}"

    def prepare(self, job_id: str, attempt: int, *, cpus: int | None, memory: int | None) -> Cell:
        """Creates the attempt's cgroup and sets its limits; OSError when the
        cgroup cannot be made (a machine problem, not the job's)."""
        cell = self.cell(job_id, attempt)
        path = self._path(cell)
        self.root.mkdir(exist_ok=True)
        path.mkdir(exist_ok=True)
        if memory is not None and "memory" in self.controllers:
            _write(path / "memory.max", str(memory))
            # a job with one process OOM-killed (a data loader worker) usually hangs holding its GPUs: end it all
            _write(path / "memory.oom.group", "1")
        if cpus is not None and "cpu" in self.controllers:
            _write(path / "cpu.max", f"{cpus * CPU_PERIOD_US} {CPU_PERIOD_US}")
        return cell

    def cell(self, job_id: str, attempt: int) -> Cell:
        name = cell_name(job_id, attempt)
        return Cell(name, {PROCS_VAR: str(self.root / name / "cgroup.procs"),
                           CELL_VAR: f"{name}.{self.token}"})

    def place(self, cell: Cell, pid: int) -> None:
        """Moves `pid` into the cell: for a wrapper that runs as another user,
        which may not write cgroup.procs itself (the daemon does, before the
        wrapper runs the job)."""
        _write(self._path(cell) / "cgroup.procs", str(pid))

    def kill(self, cell: Cell) -> None:
        path = self._path(cell)
        if not path.is_dir():
            # no such cgroup (started by a daemon that used another root): the marker still finds them
            _sweep(lambda: _marked_everywhere(_needle(cell)))
            return
        if not self._populated(path):
            return   # the common case: one small read
        if self.has_kill:
            try:
                _write(path / "cgroup.kill", "1")
                return
            except OSError:
                pass
        self._freeze_and_kill(path)

    def oom_killed(self, cell: Cell) -> bool:
        events = _read(self._path(cell) / "memory.events") or ""
        for line in events.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return value.strip().isdigit() and int(value) > 0
        return False

    def release(self, cell: Cell) -> None:
        path = self._path(cell)
        deadline = time.monotonic() + RELEASE_DEADLINE_S
        while True:
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                # EBUSY: killed processes are still on their way out
                if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                    return
            time.sleep(0.01)

    def reap_strays(self, keep: Collection[int]) -> int:
        return 0   # orphans of a cgroup's processes go to init, not to us

    def close(self) -> None:
        """At the daemon's stop: removes the root if no cell is left in it (jobs
        kept running for the next daemon keep it). Never raises."""
        try:
            self.root.rmdir()
        except OSError:
            pass

    def _path(self, cell: Cell) -> Path:
        return self.root / cell.name

    @staticmethod
    def _populated(path: Path) -> bool:
        events = _read(path / "cgroup.events")
        if events is None:   # no cgroup.events (a fake root): go by cgroup.procs
            return bool((_read(path / "cgroup.procs") or "").split())
        return "populated 1" in events

    @staticmethod
    def _freeze_and_kill(path: Path) -> None:
        """Before cgroup.kill: frozen processes cannot fork, SIGKILL still ends them."""
        freeze = path / "cgroup.freeze"
        frozen = False
        try:
            _write(freeze, "1")
            frozen = True
        except OSError:
            pass
        deadline = time.monotonic() + KILL_DEADLINE_S
        try:
            while time.monotonic() < deadline:
                pids = [int(p) for p in (_read(path / "cgroup.procs") or "").split()]
                if not pids:
                    return
                for pid in pids:
                    _sigkill(pid)
                time.sleep(0.005)
        finally:
            if frozen:
                try:
                    _write(freeze, "0")
                except OSError:
                    pass


# -- subreaper and marker -------------------------------------------------------------------
class SubreaperContainment:
    """Construction makes the current process (the daemon) a child subreaper."""

    kind = "subreaper"

    def __init__(self, *, instance: str = "", reason: str = ""):
        self.token = instance_token(instance)
        self.reason = reason   # why not a cgroup, for describe()
        self.subreaper = _set_child_subreaper()
        # /proc/<pid>/task/<tid>/children needs CONFIG_PROC_CHILDREN; without it every kill scans /proc
        self.children_listed = (PROC / "self" / "task" / str(os.getpid()) / "children").exists()
        self._prepared: set[str] = set()   # cells started by this daemon: all their processes descend from it
        self._child_cells: dict[int, str] = {}   # our child's pid -> its GQA_CELL (a process keeps its cell)

    def describe(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        how = "child subreaper" if self.subreaper else "environment marker (could not become a child subreaper)"
        return f"containment: {how}{why}; memory and cpu limits not enforced"

    def prepare(self, job_id: str, attempt: int, *, cpus: int | None, memory: int | None) -> Cell:
        cell = self.cell(job_id, attempt)
        self._prepared.add(cell.name)
        return cell

    def cell(self, job_id: str, attempt: int) -> Cell:
        name = cell_name(job_id, attempt)
        return Cell(name, {CELL_VAR: f"{name}.{self.token}"})

    def place(self, cell: Cell, pid: int) -> None:
        pass   # the marker travels with the environment

    def kill(self, cell: Cell) -> None:
        needle = _needle(cell)
        if cell.name in self._prepared and self.subreaper and self.children_listed:
            # every process of the cell descends from us: orphans re-parented to us, the rest below the wrapper
            _sweep(lambda: self._marked_below_us(cell.env[CELL_VAR]))
        else:
            _sweep(lambda: _marked_everywhere(needle))

    def _marked_below_us(self, marker: str) -> Found:
        """Our children with the marker and everything below them. Cheap when
        nothing is left: one read of our children list; the markers of the
        other jobs' wrappers are remembered (an environ read costs ~35 us)."""
        children = _children(PROC / "self") or []
        known = {pid: self._child_cells[pid] for pid in children if pid in self._child_cells}
        roots = []
        for pid in children:
            value = known.get(pid)
            if value is None:
                value = _cell_of(pid)
                if value is not None:   # none (yet): a process of no cell, or a child not exec'd yet
                    known[pid] = value
            if value == marker:
                roots.append(pid)
        self._child_cells = known   # only children still listed: a pid comes back only once the pid counter wraps
        return _with_descendants(roots) if roots else {}

    def oom_killed(self, cell: Cell) -> bool:
        return False   # no memory limit of ours to exceed; the system's OOM killer is not told apart

    def release(self, cell: Cell) -> None:
        self._prepared.discard(cell.name)

    def reap_strays(self, keep: Collection[int]) -> int:
        """Reaps our zombie children except `keep` (the wrappers the executor
        reaps through their pidfds). Orphans re-parented to us that ended, or
        that kill() left unreaped because they lead a session like a wrapper
        does, stay zombies until this runs; call it from the event loop after
        collecting exits. Never waitpid(-1): that would take the wrappers' statuses."""
        reaped = 0
        for pid in _children(PROC / "self") or ():
            if pid in keep:
                continue
            info = _stat(pid)
            if info is not None and info[0] == "Z":
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        reaped += 1
                except ChildProcessError:
                    pass
        return reaped

    def close(self) -> None:
        pass


def _set_child_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# -- finding and killing marked processes ---------------------------------------------------
Found = dict[int, int]   # pid -> its session id


def _sweep(find: Callable[[], Found]) -> None:
    """SIGKILL what `find` returns until two looks in a row find nothing
    (/proc's children lists may skip entries while processes exit), or the
    deadline. Reaps the killed that are our children, except session leaders:
    the launcher's wrapper leads its session, and its status belongs to the
    executor (a stray that called setsid waits for reap_strays())."""
    me = os.getpid()
    killed: dict[int, bool] = {}   # pid -> ours to reap if it is our child
    deadline = time.monotonic() + KILL_DEADLINE_S
    quiet = 0
    while True:
        found = find()
        found.pop(me, None)
        if not found:
            quiet += 1
            if not killed or quiet >= 2:
                break
        else:
            quiet = 0
            for pid, session in found.items():
                _sigkill(pid)
                killed.setdefault(pid, pid != session)
        _reap(killed)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.001)   # let the killed die before looking again
    _reap(killed)


def _reap(killed: dict[int, bool]) -> None:
    for pid, reapable in list(killed.items()):
        if not reapable:
            continue
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                killed[pid] = False
        except ChildProcessError:
            pass   # not (or not yet) our child: re-parented to us only when its parent dies


def _marked_everywhere(needle: bytes) -> Found:
    """Every marked process on the machine (that we may read), and their
    descendants: for a cell whose processes need not descend from us."""
    roots = []
    try:
        entries = os.listdir(PROC)
    except OSError:
        return {}
    for entry in entries:
        if entry.isdigit() and _has_needle(int(entry), needle):
            roots.append(int(entry))
    return _with_descendants(roots) if roots else {}


def _with_descendants(roots: list[int]) -> Found:
    """The live ones among roots and all their descendants (a process that
    cleared its environment is still its parent's), with their session ids."""
    found: Found = {}
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        info = _stat(pid)
        if info is None or info[0] in ("Z", "X"):
            continue   # gone or dead: nothing to kill, its children were re-parented
        found[pid] = info[2]
        todo.extend(_children(PROC / str(pid)) or ())
    return found


def _needle(cell: Cell) -> bytes:
    return f"\0{CELL_VAR}={cell.env[CELL_VAR]}\0".encode()


def _has_needle(pid: int, needle: bytes) -> bool:
    try:
        with open(PROC / str(pid) / "environ", "rb") as fh:
            environ = fh.read()
    except OSError:   # gone, or not ours to read
        return False
    return needle in b"\0" + environ + b"\0"


def _cell_of(pid: int) -> str | None:
    """The GQA_CELL value in a process's environment."""
    try:
        with open(PROC / str(pid) / "environ", "rb") as fh:
            environ = b"\0" + fh.read()
    except OSError:
        return None
    start = environ.find(b"\0" + CELL_VAR.encode() + b"=")
    if start < 0:
        return None
    start += len(CELL_VAR) + 2
    end = environ.find(b"\0", start)
    return environ[start:end if end >= 0 else None].decode(errors="replace")


def _children(proc_dir: Path) -> list[int] | None:
    """Children of every thread of a process; None when the kernel lists none
    (no CONFIG_PROC_CHILDREN) or the process is gone."""
    try:
        tasks = os.listdir(proc_dir / "task")
    except OSError:
        return None
    pids: list[int] = []
    for tid in tasks:
        try:
            with open(proc_dir / "task" / tid / "children", "rb") as fh:
                pids.extend(int(p) for p in fh.read().split())
        except OSError:
            continue
    return pids


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, session id) from /proc/<pid>/stat, None if gone."""
    try:
        with open(PROC / str(pid) / "stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except OSError:
        return None


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


# -- choosing one ------------------------------------------------------------------------------
def choose_containment(root_hint: str | Path | None = None, *, allow_cgroup: bool = True,
                       instance: str | None = None) -> Containment:
    """A cgroup v2 containment when we can create cgroups, else the subreaper.

    root_hint: the cgroup v2 directory whose children will be the cells
    (created if missing); by default `gqa-<token>` inside the daemon's own
    cgroup. instance: what identifies this queue, see instance_token(); the
    daemon passes its GQA_HOME (by default the one in the environment: two
    daemons that share an instance would kill each other's jobs "1.1").
    When the memory and cpu controllers are available but not enabled, the
    daemon may move itself into a leaf `gqa-daemon` of its own cgroup so
    they can be (cgroup v2 allows no processes beside enabled children)."""
    if instance is None:
        instance = str(StatePaths.from_env().home)
    reason = "cgroups not allowed"
    if allow_cgroup:
        try:
            return _cgroup_containment(root_hint, instance)
        except OSError as exc:
            reason = f"no writable cgroup v2: {exc.strerror or exc}"
    return SubreaperContainment(instance=instance, reason=reason)


def favours_dynamic_changes(mountinfo: str) -> bool:
    """Is the first cgroup2 mount mounted with `favordynmods` (Linux 6.0+)?
    Without it, moving a process into a cgroup waits for an RCU grace period
    whenever none happened lately: 8-16 ms for a job started on an idle queue."""
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        fields = after.split()
        if sep and fields and fields[0] == "cgroup2":
            return "favordynmods" in (fields[2] if len(fields) > 2 else "").split(",")
    return False


def cgroup2_mount(mountinfo: str) -> tuple[str, str] | None:
    """(mount point, mount root) of the first cgroup2 mount in /proc/self/mountinfo's text."""
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        if sep and after.split(" ", 1)[0] == "cgroup2":
            fields = before.split()
            return _unescape(fields[4]), _unescape(fields[3])
    return None


def own_cgroup(proc_cgroup: str) -> str | None:
    """Our cgroup v2 path from /proc/self/cgroup's text (the `0::` line)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip()
    return None


def _unescape(path: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _cgroup_containment(root_hint: str | Path | None, instance: str) -> CgroupContainment:
    mountinfo = _read(PROC / "self" / "mountinfo") or ""
    mount = cgroup2_mount(mountinfo)
    own = own_cgroup(_read(PROC / "self" / "cgroup") or "")
    if mount is None:
        raise OSError(errno.ENOENT, "no cgroup2 mount")
    if own is None:
        raise OSError(errno.ENOENT, "no cgroup v2 line in /proc/self/cgroup")
    point, mount_root = mount
    relative = own if mount_root == "/" else own[len(mount_root):] if own.startswith(mount_root) else None
    if relative is None:
        raise OSError(errno.ENOENT, f"our cgroup {own} is not under the cgroup2 mount")
    own_dir = Path(point + relative.rstrip("/")) if relative != "/" else Path(point)
    root = Path(root_hint) if root_hint is not None else own_dir / f"gqa-{instance_token(instance)}"
    if not (root.parent / "cgroup.subtree_control").exists():
        raise OSError(errno.ENOTDIR, f"{root.parent} is no cgroup v2 directory")
    root.mkdir(exist_ok=True)
    probe = root / f".probe-{os.getpid()}"
    probe.mkdir()
    try:
        if not (probe / "cgroup.procs").exists():
            raise OSError(errno.ENOTDIR, f"{root} is no cgroup v2 directory")
    finally:
        probe.rmdir()
    controllers, note = _enable_controllers(root, own_dir, is_mount_root=relative == "/")
    slow = "" if favours_dynamic_changes(mountinfo) else \
        "; a job started after a quiet moment waits 8-16 ms to enter its cgroup: mount cgroup2 with favordynmods"
    return CgroupContainment(root, instance=instance, controllers=controllers, note=note, slow_moves=slow)


def _enable_controllers(root: Path, own_dir: Path, *, is_mount_root: bool) -> tuple[tuple[str, ...], str]:
    """Enables memory and cpu for root's children; returns those enabled and,
    if some are not, why. Never raises: without limits, kill still works."""
    parent = root.parent
    available = (_read(parent / "cgroup.controllers") or "").split()
    wanted = [c for c in LIMIT_CONTROLLERS if c in available]
    if not wanted:
        return (), "controllers unavailable"
    plus = " ".join(f"+{c}" for c in wanted)
    try:
        if any(c not in (_read(parent / "cgroup.subtree_control") or "").split() for c in wanted):
            # no internal processes: a cgroup (other than the root) with processes cannot enable
            # controllers for its children; if the only one is us, we move into a leaf first
            # (with others there, the write below fails and limits stay off)
            if parent == own_dir and not is_mount_root and \
                    (_read(parent / "cgroup.procs") or "").split() == [str(os.getpid())]:
                leaf = parent / "gqa-daemon"
                leaf.mkdir(exist_ok=True)
                _write(leaf / "cgroup.procs", str(os.getpid()))
            _write(parent / "cgroup.subtree_control", plus)
        _write(root / "cgroup.subtree_control", plus)
    except OSError as exc:
        return (), f"could not enable controllers: {exc.strerror or exc}"
    missing = [c for c in LIMIT_CONTROLLERS if c not in wanted]
    return tuple(wanted), ("controller unavailable" if missing else "")
