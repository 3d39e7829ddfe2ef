"""The daemon's doorbell: a Unix datagram socket under GQA_HOME. Writers ring
it after a change so the daemon reacts at once instead of polling."""

import errno
import hashlib
import os
import socket
import stat
from collections.abc import Iterable

from ...models.errors import BackendUnavailable, StorageUnavailable
from .paths import StatePaths

WAKE, STOP, STOP_KEEP_JOBS = b"wake", b"stop", b"stop-keep"
_MAX_PATH = 100  # sun_path holds 108 bytes


def socket_address(paths: StatePaths) -> str | bytes:
    path = str(paths.socket)
    if len(path.encode()) < _MAX_PATH:
        return path
    # too deep for a filesystem socket: an abstract one named after the home
    return b"\0gqa-" + hashlib.sha256(str(paths.home).encode()).hexdigest()[:24].encode()


def bound_socket(kind: int, address: str | bytes) -> socket.socket:
    """A Unix socket of `kind` bound at `address`. A socket left at the path is a dead daemon's
    (the home's lock is ours) and is replaced; anything else there, or a name another process
    holds, is one line naming the address (StorageUnavailable, BackendUnavailable)."""
    if isinstance(address, str):
        _clear(address)
    sock = socket.socket(socket.AF_UNIX, kind)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise _not_bound(address, exc) from None
    return sock


def _clear(path: str) -> None:
    """Remove a socket left at `path`; refuse to remove anything else."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISSOCK(mode):
            os.unlink(path)
            return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _not_bound(path, exc) from None
    raise StorageUnavailable(f"cannot listen at {path}: {_kind_of(mode)} is there, not a socket; "
                             "move it away and start again")


def _kind_of(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISREG, "a regular file"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((word for test, word in kinds if test(mode)), "something")


def _not_bound(address: str | bytes, exc: OSError) -> Exception:
    shown = address if isinstance(address, str) else "@" + address[1:].decode(errors="replace")
    if exc.errno == errno.EADDRINUSE:   # an abstract name is anyone's to take first
        return BackendUnavailable(f"cannot listen at {shown}: another process holds it")
    return StorageUnavailable(f"cannot listen at {shown}: {exc.strerror or exc}")


class SocketWaker:
    def __init__(self, paths: StatePaths):
        self.address = socket_address(paths)

    def wake(self, jobs: Iterable[str] = ()) -> None:
        self.send(WAKE)   # the daemon reads SQLite, which never lags: what changed needs no naming

    def send(self, message: bytes) -> bool:
        """True if a daemon is listening. Never blocks: a full queue means the
        daemon has wake-ups waiting already, and one serves them all."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            try:
                sock.sendto(message, self.address)
                return True
            except (FileNotFoundError, ConnectionRefusedError, PermissionError):
                return False
            except (BlockingIOError, InterruptedError):
                return True


class Doorbell:
    """The daemon's end."""

    def __init__(self, paths: StatePaths):
        self.address = socket_address(paths)
        self.sock = bound_socket(socket.SOCK_DGRAM, self.address)
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> list[bytes]:
        messages = []
        while True:
            try:
                messages.append(self.sock.recv(64))
            except BlockingIOError:
                return messages

    def close(self) -> None:
        self.sock.close()
        if isinstance(self.address, str):
            try:
                os.unlink(self.address)
            except FileNotFoundError:
                pass


def drain(fd: int) -> None:
    """Read a non-blocking self-pipe empty: the wake-ups it held are all answered by one look."""
    try:
        while os.read(fd, 512):
            pass
    except (BlockingIOError, InterruptedError):
        pass
