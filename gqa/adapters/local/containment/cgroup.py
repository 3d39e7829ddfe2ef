"""Cells as cgroup v2 directories: kill with cgroup.kill, limits where the
controllers can be enabled, OOM kills from memory.events."""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from pathlib import Path
from typing import Collection

from .cells import (CELL_VAR, CPU_PERIOD_US, Cell, KILL_DEADLINE_S, LIMIT_CONTROLLERS, PROC, PROCS_VAR,
                    RELEASE_DEADLINE_S, _read, _write, cell_name, instance_token)
from .processes import _marked_everywhere, _needle, _signal, _sweep


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
                    _signal(pid, signal.SIGKILL)
                time.sleep(0.005)
        finally:
            if frozen:
                try:
                    _write(freeze, "0")
                except OSError:
                    pass


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
