"""Slurm's --output, --error and --input for a local attempt: the files
the job's stdout and stderr are also written to (gqa's log keeps its own
copy) and the file its stdin comes from, expanded from sbatch's patterns
and taken relative to the job's working directory.

The files are opened here, before the attempt is launched, as the job's
user (a root daemon runs a small sh as the user: opening them as root would
let a job truncate or append to any file of the machine), so a missing
directory or a file the user may not write fails the launch as the job's
own error, with the reason, instead of an attempt that runs and loses its
output. The first attempt truncates them, as sbatch does by default, unless
the job asks for --open-mode=append; a later attempt (a retry, a requeue)
appends, as Slurm appends for a requeued job."""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass

from ...models.errors import LaunchFailed
from ...models.job import JobRecord
from ...models.slurm_env import job_pattern

ONLY = "not a regular file or a character device such as /dev/null"   # why a FIFO or socket is refused
# $1 output, $2 error, $3 input ('' for none), $4 "truncate" or "append". A FIFO or socket is refused
# before it is opened, and dd opens with O_NONBLOCK (a FIFO made in its place meanwhile does not hold
# the open either), so the daemon that waits on this shell is never held up by a file of the job's
_OPEN_AS_USER = (
    f'refuse() {{ if [ -p "$1" ]; then echo "$1 is a FIFO, {ONLY}" >&2; exit 1; fi; '
    f'if [ -S "$1" ]; then echo "$1 is a socket, {ONLY}" >&2; exit 1; fi; }}; '
    'for p in "$1" "$2"; do [ -z "$p" ] && continue; refuse "$p"; '
    'if [ "$4" = truncate ]; then dd of="$p" oflag=nonblock count=0 status=none || exit 1; '
    'else dd of="$p" oflag=nonblock,append conv=notrunc count=0 status=none || exit 1; fi; done; '
    '[ -z "$3" ] || { refuse "$3"; dd if="$3" iflag=nonblock count=0 status=none || exit 1; }'
)


@dataclass(frozen=True)
class Streams:
    """Absolute paths, '' where the job names none."""
    output: str = ""
    error: str = ""
    input: str = ""
    append: bool = False     # --open-mode=append: the first attempt keeps what the files hold too

    @property
    def any(self) -> bool:
        return bool(self.output or self.error or self.input)

    def wrapper_args(self) -> list[str]:
        return [self.output, self.error, self.input]


def streams_of(job: JobRecord, workdir: str, host: str) -> Streams:
    spec = job.spec

    def path(pattern: str | None) -> str:
        return "" if pattern is None else os.path.join(workdir, job_pattern(pattern, job, host))
    return Streams(path(spec.output), path(spec.error), path(spec.input), append=spec.open_mode == "append")


def open_streams(streams: Streams, attempt: int, identity: dict, umask: int = 0o022) -> None:
    """Create (the first attempt: truncate, unless --open-mode=append) the
    output files and check the input can be read, as the job's user
    (`identity`: Popen's user/group, or {} for a daemon that is that user).
    LaunchFailed says which and why. A file made here gets the job's `umask`,
    not the daemon's."""
    if not streams.any:
        return
    truncate = attempt <= 1 and not streams.append
    if identity:
        _open_as(streams, truncate, identity, umask)
        return
    for what, path in (("output", streams.output), ("error", streams.error)):
        if path:
            try:
                _touch(path, os.O_WRONLY | os.O_CLOEXEC | (os.O_TRUNC if truncate else os.O_APPEND), umask)
            except OSError as exc:
                raise LaunchFailed(f"cannot write its {what} file {path}: {exc.strerror}") from None
    if streams.input:
        try:
            _check_open(streams.input, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise LaunchFailed(f"cannot read its input file {streams.input}: {exc.strerror}") from None


def _touch(path: str, flags: int, umask: int) -> None:
    """Open `path` (made if missing: its mode as the job's umask makes it, the
    daemon's own umask being 077) and close it; an existing file keeps its mode."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o666 & ~umask)
        finally:
            os.close(fd)
    except FileExistsError:
        _check_open(path, flags)


def _check_open(path: str, flags: int) -> None:
    """Open an existing `path` and close it, without waiting: a FIFO would hold the daemon
    until something opened its other end. Raises OSError for one, or for a socket."""
    try:   # said before the open, where a FIFO no one reads gives ENXIO ("No such device or address")
        kind = _kind_refused(os.stat(path).st_mode)
    except OSError:
        kind = ""
    if kind:
        raise OSError(0, f"it is a {kind}, {ONLY}")
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        kind = _kind_refused(os.fstat(fd).st_mode)   # made in its place meanwhile
        if kind:
            raise OSError(0, f"it is a {kind}, {ONLY}")
    finally:
        os.close(fd)


def _kind_refused(mode: int) -> str:
    return "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else ""


def _open_as(streams: Streams, truncate: bool, identity: dict, umask: int) -> None:
    try:
        done = subprocess.run(["/bin/sh", "-c", _OPEN_AS_USER, "gqa-streams", *streams.wrapper_args(),
                               "truncate" if truncate else "append"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30, close_fds=True, cwd="/", umask=umask,
                              **identity)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchFailed(f"cannot open its output, error or input file: {exc}") from None
    if done.returncode != 0:
        # dd says "dd: failed to open '/x/y.out': No such file or directory", sh "gqa-streams: 1: dd: not found"
        said = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}"
        said = said.split(": ", 2)[-1] if said.startswith("gqa-streams:") else said
        said = said.removeprefix("dd: ")
        raise LaunchFailed(f"cannot open its output, error or input file: {said}")
