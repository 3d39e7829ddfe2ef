"""The daemon's doorbell: a Unix datagram socket under GQA_HOME. Writers ring
it after a change so the daemon reacts at once instead of polling."""

import hashlib
import os
import socket
from collections.abc import Iterable

from .paths import StatePaths

WAKE, STOP, STOP_KEEP_JOBS = b"wake", b"stop", b"stop-keep"
_MAX_PATH = 100  # sun_path holds 108 bytes


def socket_address(paths: StatePaths) -> str | bytes:
    path = str(paths.socket)
    if len(path.encode()) < _MAX_PATH:
        return path
    # too deep for a filesystem socket: an abstract one named after the home
    return b"\0gqa-" + hashlib.sha256(str(paths.home).encode()).hexdigest()[:24].encode()


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
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if isinstance(self.address, str):
            try:
                os.unlink(self.address)
            except FileNotFoundError:
                pass
        self.sock.bind(self.address)
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
