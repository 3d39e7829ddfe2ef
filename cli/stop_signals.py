"""Ctrl-C and SIGTERM as a request to stop, for the commands that run until
stopped (`gqa top`, `gqa ui`): they must exit 0 on a stop wherever it lands.

A KeyboardInterrupt is not enough: raised while Python runs a string of code
(every dataclass and namedtuple is made that way, so any import may be doing
it), it marks the process, and CPython then ends the process with SIGINT on
its way out even when the command caught the exception: exit 130, not 0. So
while these commands run, the signals only set a flag, write a byte to a pipe
their waits can select on, and call what was asked to be told (the web
server's own stop)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Whether a stop came; `wait` sleeps until one comes, or a given file is readable."""

    def __init__(self) -> None:
        self.requested = False
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)
        self._told: list[Callable[[], None]] = []

    def tell(self, callback: Callable[[], None]) -> None:
        """Call `callback` on a stop (at once if one came already)."""
        self._told.append(callback)
        if self.requested:
            callback()

    def wait(self, seconds: float, fds: tuple[int, ...] = ()) -> list[int]:
        """Up to `seconds`, less when a stop comes or one of `fds` is readable; the readable ones of `fds`."""
        if self.requested:
            return []
        ready, _, _ = select.select([self.read_fd, *fds], [], [], max(0.0, seconds))
        return [fd for fd in ready if fd != self.read_fd]

    def _handle(self, signum, frame) -> None:
        self.requested = True
        with contextlib.suppress(BlockingIOError):   # a byte already waits: one is enough
            os.write(self.write_fd, b"\0")
        for callback in self._told:
            callback()

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """While inside, SIGINT and SIGTERM request a stop instead of raising or ending the process;
    the handlers found are put back on the way out."""
    stop = StopRequest()
    previous = {signum: signal.signal(signum, stop._handle) for signum in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        stop.close()
