"""One daemon per state directory: it holds an exclusive lock on the pid file.

`gqa local start` takes that lock itself (`take_lock`) before it writes the
queue's inventory and hands it down to the daemon it starts (`acquire_lock`
with the descriptor), so of two starts at once the one refused writes nothing."""

import fcntl
import os

from ...models.errors import GqaError
from .paths import StatePaths
from .storage_errors import storage_errors


class AlreadyRunning(GqaError):
    def __init__(self, pid: int | None):
        self.pid = pid
        # no pid yet: another `gqa local start` holds the lock while its daemon starts
        super().__init__(f"a gqa daemon is already running (pid {pid})" if pid is not None
                         else "a gqa daemon is already starting (another `gqa local start` holds the lock)")


def take_lock(paths: StatePaths) -> int:
    """Lock the pid file for a daemon about to start (AlreadyRunning if another
    holds it) and empty it: no pid until the daemon writes its own."""
    return _lock(paths, pid=False)


def acquire_lock(paths: StatePaths, fd: int | None = None) -> int:
    """Lock the pid file and write our pid; keep the fd open for the daemon's lifetime.
    `fd`: the lock `take_lock` took, inherited from the `gqa local start` that started us."""
    if fd is None:
        return _lock(paths, pid=True)
    with storage_errors(paths.pidfile):
        held, here = os.fstat(fd), os.stat(paths.pidfile)
        if (held.st_dev, held.st_ino) != (here.st_dev, here.st_ino):
            raise GqaError(f"descriptor {fd} is not the lock on {paths.pidfile}")
        try:   # a no-op on the description that holds it; refused where it does not
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyRunning(read_pid(paths)) from None
        _write_pid(fd, os.getpid())
    os.set_inheritable(fd, False)   # inherited, it is inheritable: a job holding it would outlive us with it
    return fd


def _lock(paths: StatePaths, *, pid: bool) -> int:
    paths.ensure()
    with storage_errors(paths.pidfile):   # unwritable, read-only or full: one line naming the file
        fd = os.open(paths.pidfile, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(read_pid(paths)) from None
        try:
            _write_pid(fd, os.getpid() if pid else None)
        except OSError:
            os.close(fd)
            raise
    return fd


def _write_pid(fd: int, pid: int | None) -> None:
    os.ftruncate(fd, 0)
    if pid is not None:
        os.pwrite(fd, str(pid).encode(), 0)


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
