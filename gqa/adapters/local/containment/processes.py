"""Finding and killing the processes that carry a cell's marker (/proc)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable

from .cells import CELL_VAR, Cell, KILL_DEADLINE_S, PROC


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
            # all stopped before any is killed: a parent must not see its children die
            # and end on its own (a shell's `wait` returning 0) before its SIGKILL lands
            for pid in found:
                _signal(pid, signal.SIGSTOP)
            for pid, session in found.items():
                _signal(pid, signal.SIGKILL)
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


def _signal(pid: int, signum: signal.Signals) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
