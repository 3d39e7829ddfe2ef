"""Cells without cgroups: the daemon is a child subreaper and finds a cell's
processes by the marker in their environment."""

from __future__ import annotations

import ctypes
import os
from typing import Collection

from .cells import CELL_VAR, Cell, PROC, PR_SET_CHILD_SUBREAPER, cell_name, instance_token
from .processes import Found, _cell_of, _children, _marked_everywhere, _needle, _stat, _sweep, _with_descendants


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
