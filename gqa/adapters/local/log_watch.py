"""The cap on running jobs' logs, held while the jobs write (log_rotation.py
rotates a log past it).

A job writes its log itself, through the file the executor opened for it,
so only a look at the file's size finds it past its cap, and whatever the
job writes between two looks lands over the cap. Looks every few seconds let
a job printing in a tight loop put tens of MB to GBs into a part of a 64 KiB
log; looks every few milliseconds at every log would keep the daemon busy
for jobs that print nothing for hours. So each log is in one of two states:
- idle (its last look found it as the one before): the kernel is asked
  (inotify.py, a one-shot watch) to say when it is next written, and the
  daemon looks at once; nothing else costs anything;
- written: looked at again after `pause`, which shrinks to QUICKEST as the
  log nears its cap, until a look finds it unchanged. No watch meanwhile:
  a watched file costs its writer a few microseconds of kernel time on
  every write, which a job printing line by line would pay on each line.
A job thus passes its cap by what it writes in about QUICKEST, and what it
writes while the rotation chases it (log_rotation.CHASE). A log the kernel
cannot watch (the watches used up) is looked at every POLL_EVERY while idle.

The looks run on a thread of their own: the daemon's loop ends each turn
in a scheduling pass, and neither should wait on the other. The loop hands
over the logs of the running attempts (`follow`); the log of an attempt
that ended gets one last look, so a burst just before its exit is capped
too (and, its writer gone, that rotation loses nothing). A daemon killed in
the middle of a rotation leaves it to log_recovery.py, as before.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .inotify import Events, Inotify
from .log_rotation import LogLimits, rotate_if_needed
from .wake import drain

log = logging.getLogger("gqa.daemon")

QUICKEST = 0.01           # seconds: the shortest pause between looks at logs being written
SLOWEST = 1.0             # ... and the longest, however far below its cap a log is
FASTEST = 1 << 30         # bytes/s a job is taken to be able to write, unless seen writing faster
POLL_EVERY = 0.25         # seconds between looks at a log the kernel does not watch
RETRY = 1.0               # seconds before a rotation that failed (a full disk) is tried again


def pause(headroom: int, rate: float) -> float:
    """Seconds from a look at a log `headroom` bytes below its cap (0 or less:
    at or over it), seen growing at `rate` bytes/s since the look before, to
    the next: QUICKEST, plus the time the job would take to fill the
    headroom writing at FASTEST or at twice its rate, whichever is faster;
    at most SLOWEST. A job that writes no faster than that is looked at
    again before it is more than QUICKEST's worth of output over its cap."""
    fill = max(0, headroom) / max(FASTEST, 2.0 * max(0.0, rate))
    return min(SLOWEST, QUICKEST + fill)


@dataclass
class _Log:
    path: str
    wd: int | None = None        # its one-shot watch while idle
    due: float | None = None     # its next look while written (or polled); None: when the watch fires
    size: int = 0                # bytes at the last look, after any rotation
    at: float | None = None      # when that was
    rate: float = 0.0            # bytes/s between the last two looks
    retry_at: float = 0.0        # after a failed rotation: not before
    failing: bool = False


class LogWatch:
    def __init__(self, limits: LogLimits, *, clock: Callable[[], float] = time.monotonic,
                 inotify: Callable[[], Inotify] = Inotify.open):
        self.limits, self.clock = limits, clock
        try:
            self._inotify: Inotify | None = inotify()
        except OSError as exc:
            log.warning("job logs are looked at every %g s while idle, not told when written: %s", POLL_EVERY, exc)
            self._inotify = None
        self._logs: dict[str, _Log] = {}
        self._by_wd: dict[int, _Log] = {}
        self._lock = threading.Lock()
        self._wanted: frozenset[str] | None = None
        self._handed: frozenset[str] = frozenset()
        self._stopping = False
        self._bell_r, self._bell_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread: threading.Thread | None = None

    # -- the daemon's loop ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gqa-log-cap", daemon=True)
        self._thread.start()

    def follow(self, paths: Iterable[str]) -> None:
        """The logs of the attempts running now; called every turn, cheap when they are the same."""
        wanted = frozenset(paths)
        if wanted == self._handed:
            return
        self._handed = wanted
        with self._lock:
            self._wanted = wanted
        self._ring()

    def stop(self, timeout: float = 10.0) -> None:
        """Give each log a last look, then end the thread."""
        with self._lock:
            self._stopping = True
        self._ring()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._thread is None or not self._thread.is_alive():
            for fd in (self._bell_r, self._bell_w):
                os.close(fd)
            if self._inotify is not None:
                self._inotify.close()

    # -- the thread -------------------------------------------------------------------------------------
    def _run(self) -> None:
        said = ""
        while True:
            try:
                if not self.turn():
                    return
                said = ""
            except Exception as exc:   # never a reason to stop capping: said once, tried again
                if str(exc) != said:
                    log.exception("the log cap watch failed; trying again")
                    said = str(exc)
                time.sleep(RETRY)

    def turn(self, wait: bool = True) -> bool:
        """Take the logs handed over, wait for a watch to fire or a look to
        come due (unless `wait` is False), look at the logs due; False once
        stopped."""
        with self._lock:
            wanted, self._wanted, stopping = self._wanted, None, self._stopping
        if wanted is not None:
            self._sync(wanted)
        if stopping:
            self._sync(frozenset())
            return False
        ready = self._wait(self._timeout(self.clock()) if wait else 0.0)
        if self._bell_r in ready:
            drain(self._bell_r)
        if self._inotify is not None and self._inotify.fileno() in ready:
            self._note(self._inotify.read(), self.clock())
        now = self.clock()
        for entry in list(self._logs.values()):
            # looks due within half of QUICKEST are taken together: fewer wake-ups, none later
            if entry.due is not None and now >= max(entry.due - QUICKEST / 2, entry.retry_at):
                self._look(entry, now)
        return True

    def _wait(self, timeout: float | None) -> set[int]:
        poller = select.poll()
        poller.register(self._bell_r, select.POLLIN)
        if self._inotify is not None:
            poller.register(self._inotify.fileno(), select.POLLIN)
        try:
            return {fd for fd, _ in poller.poll(None if timeout is None else max(0, int(timeout * 1000 + 0.999)))}
        except InterruptedError:
            return set()

    def _timeout(self, now: float) -> float | None:
        """Seconds to the next look due; None: none is, until a watch fires."""
        due = [max(entry.due - QUICKEST / 2, entry.retry_at) for entry in self._logs.values() if entry.due is not None]
        return max(0.0, min(due) - now) if due else None

    def _note(self, events: Events, now: float) -> None:
        fired = events.written | events.gone          # a watch gone (its file deleted): looked at, and so on
        if events.overflowed:                         # some were lost: any watched log may have been written
            fired |= set(self._by_wd)
        for wd in fired:
            entry = self._by_wd.pop(wd, None)
            if entry is not None:
                if events.overflowed and self._inotify is not None:
                    self._inotify.remove(wd)
                entry.wd, entry.due = None, now

    def _sync(self, wanted: frozenset[str]) -> None:
        now = self.clock()
        for path in [p for p in self._logs if p not in wanted]:
            entry = self._logs.pop(path)
            self._disarm(entry)
            self._look(entry, now, last=True)
        for path in wanted - self._logs.keys():
            entry = self._logs[path] = _Log(path)
            self._look(entry, now)    # what it wrote before it was handed over

    def _look(self, entry: _Log, now: float, *, last: bool = False) -> None:
        """Rotate the log if it is over its cap (on a last look, settle any
        rotation left half done too); note its size and rate, and when to
        look next: after `pause` if it was written, else when it is."""
        entry.due = None
        try:
            size = _size(entry.path)
            if size > self.limits.max_bytes or last or entry.failing:
                rotate_if_needed(entry.path, self.limits)
                after = _size(entry.path)
            else:
                after = size
        except OSError as exc:   # left whole and unrotated (a full disk): said once, tried again
            if not entry.failing:
                log.warning("cannot rotate %s: %s", entry.path, exc)
            entry.failing, entry.retry_at, entry.due = True, now + RETRY, now + RETRY
            self._disarm(entry)
            return
        if entry.failing:
            log.info("rotating %s works again", entry.path)
        entry.failing = False
        written = size != entry.size
        if entry.at is not None and now > entry.at:
            entry.rate = max(0, size - entry.size) / (now - entry.at)
        entry.size, entry.at = after, now
        if last:
            return
        if written:
            self._disarm(entry)
            entry.due = now + pause(self.limits.max_bytes - after, entry.rate)
        elif entry.wd is None:
            self._arm(entry, now)

    def _arm(self, entry: _Log, now: float) -> None:
        """Have the kernel say when the log is next written; where it cannot, look every POLL_EVERY."""
        try:
            if self._inotify is None:
                raise OSError("no inotify")
            entry.wd = self._inotify.add(entry.path)
        except OSError:   # not there (yet, or any more), or the watches used up
            entry.due = now + POLL_EVERY
            return
        self._by_wd[entry.wd] = entry
        if _size(entry.path) != entry.size:   # written as the watch was set: its event may have come before
            entry.due = now

    def _disarm(self, entry: _Log) -> None:
        if entry.wd is not None:
            self._by_wd.pop(entry.wd, None)
            if self._inotify is not None:
                self._inotify.remove(entry.wd)
            entry.wd = None

    def _ring(self) -> None:
        try:
            os.write(self._bell_w, b"\0")
        except (BlockingIOError, OSError):
            pass   # rung already (a full pipe), or closed after a stop


def _size(path: str) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0
