"""What both kinds of containment share: the cell, the protocol, names, and
small file reads and writes."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Protocol


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


def _read(path: Path) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except OSError:
        return None


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)
