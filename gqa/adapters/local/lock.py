"""One daemon per state directory: it holds an exclusive lock on the pid file."""

import fcntl
import os

from ...models.errors import GqaError
from .paths import StatePaths
from .storage_errors import storage_errors


class AlreadyRunning(GqaError):
    def __init__(self, pid: int | None):
        self.pid = pid
        super().__init__(f"a gqa daemon is already running (pid {pid})")


def acquire_lock(paths: StatePaths) -> int:
    """Lock the pid file and write our pid; keep the fd open for the daemon's lifetime."""
    paths.ensure()
    with storage_errors(paths.pidfile):   # unwritable, read-only or full: one line naming the file
        fd = os.open(paths.pidfile, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(read_pid(paths)) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:
            os.close(fd)
            raise
    return fd


def read_pid(paths: StatePaths) -> int | None:
    try:
        return int(paths.pidfile.read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


def daemon_running(paths: StatePaths) -> int | None:
    """The pid of the live daemon, or None."""
    try:
        with storage_errors(paths.pidfile):   # e.g. a home the user may not read: one line, not a traceback
            fd = os.open(paths.pidfile, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_pid(paths)
    finally:
        os.close(fd)
    return None
