"""The GPUs each running step of a job holds, as Slurm allocates a step's GRES:
steps that run at once take distinct GPUs from the job's, and a step that asks
for more than are free waits until enough are given back.

The holdings are lines "<pid> <start> <gpu,...>" in a file beside
$GQA_STEP_STATUS, read and rewritten under a lock on that file, so steps that
start at once never take the same GPU. A holder whose process has ended (or
whose pid now names another process, by its start time) holds nothing: the
GPUs of a step killed outright come back. Without $GQA_STEP_STATUS (outside a
job) nothing is held and a step takes the first GPUs it asks for."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence

from .slurm_job import value
from .slurm_tools import STEP_STATUS_ENV

RETRY_EVERY = 0.25          # seconds between looks at the holdings while a step waits for GPUs


def holdings_file(env: Mapping[str, str]) -> str:
    path = env.get(STEP_STATUS_ENV, "")
    return f"{path}.gpus" if path else ""


def acquire(env: Mapping[str, str], gpus: Sequence[str], count: int, pid: int | None = None) -> list[str]:
    """`count` of the job's `gpus` for this step, held for process `pid` (srun's own): waits,
    saying so once on stderr as Slurm's srun does, while fewer are free."""
    holder = os.getpid() if pid is None else pid
    job = value(env, "SLURM_JOB_ID", "GQA_JOB_ID")
    waited = False
    while True:
        taken = take(env, gpus, count, holder)
        if taken is not None:
            if waited:
                _say(f"srun: Step created for job {job}")
            return taken
        if not waited:
            _say(f"srun: Job {job} step creation temporarily disabled, retrying (Requested nodes are busy)")
            waited = True
        time.sleep(RETRY_EVERY)


def take(env: Mapping[str, str], gpus: Sequence[str], count: int, pid: int) -> list[str] | None:
    """The first `count` free GPUs, now held for `pid`; None when fewer are free."""
    path = holdings_file(env)
    if not path:
        return list(gpus[:count])
    with _locked(path) as fd:
        held = _live(_read(fd))
        busy = {gpu for _, _, taken in held for gpu in taken}
        free = [gpu for gpu in gpus if gpu not in busy]
        if len(free) < count:
            return None
        chosen = free[:count]
        if chosen:
            _write(fd, [*held, (pid, _started(pid), chosen)])
        return chosen


def release(env: Mapping[str, str], pid: int | None = None) -> None:
    """Give back what `pid` (srun's own) holds."""
    path = holdings_file(env)
    holder = os.getpid() if pid is None else pid
    if not path or not os.path.exists(path):
        return
    with _locked(path) as fd:
        _write(fd, [line for line in _live(_read(fd)) if line[0] != holder])


_Holding = tuple[int, str, list[str]]


@contextlib.contextmanager
def _locked(path: str) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def _read(fd: int) -> list[_Holding]:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    held = []
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        pid, _, rest = line.partition(" ")
        start, _, gpus = rest.partition(" ")
        if pid.isdigit():
            held.append((int(pid), start, [gpu for gpu in gpus.split(",") if gpu]))
    return held


def _write(fd: int, held: Sequence[_Holding]) -> None:
    text = "".join(f"{pid} {start} {','.join(gpus)}\n" for pid, start, gpus in held)
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, text.encode())


def _live(held: Sequence[_Holding]) -> list[_Holding]:
    return [line for line in held if _alive(line[0], line[1])]


def _alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _started(pid) == start


def _started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, from /proc), so a pid used again by
    another process is not taken for the holder; "-" where /proc does not say, "" for a
    process that has ended and is not yet reaped."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        return "" if fields[0] in (b"Z", b"X") else fields[19].decode()
    except (OSError, IndexError):
        return "-"


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
