"""The daemon's event loop. It sleeps in epoll until a client asks something
(the request socket), another process rings the doorbell (a cancel written
straight to the database), a job's pidfd reports an exit, a signal asks it
to stop, or the next deadline comes (wall time, retry backoff, a forced
kill, a client's timeout). Every turn ends in one tick
of the control loop (Supervisor.tick), so nothing the daemon does for a
client waits on a wake-up of its own. Running jobs' logs are capped on a
thread of their own as they are written (log_watch.py): each turn hands it
the logs of the attempts running then.

Nothing here blocks: a step that fails (the disk is full, the database is
locked) is logged once per kind and retried after a backoff, while clients
keep being answered, exits keep being collected (settled later) and stop
still stops."""

from __future__ import annotations

import logging
import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gqa.adapters.clock import StepWatch
from gqa.adapters.local.wake import drain
from gqa.models.errors import GqaError, QueueMismatch, StorageCorrupt
from gqa.models.job import JobState
from gqa.ports import Exit
from gqa.services.clock_steps import follow_clock

if TYPE_CHECKING:
    from gqa.adapters.local.log_watch import LogWatch
    from gqa.adapters.local.wake import Doorbell

    from .observers import Observers
    from .server import RequestServer
    from .wiring import DaemonWiring

log = logging.getLogger("gqa.daemon")
IDLE_CHECK = 30.0          # seconds; a safety net, nothing relies on it
PRUNE_EVERY = 600.0        # seconds between deletions of jobs past the retention (services/retention.py)
PRUNE_SOON = 1.0           # seconds to the next batches while more are due
MAX_BACKOFF = 5.0
COALESCE, COALESCE_ROUNDS = 0.001, 3   # seconds to wait for more exits after one, and how many times
# faults no retry mends: the daemon stops (running jobs keep running; the next daemon adopts them)
FATAL = (StorageCorrupt, QueueMismatch)


@dataclass
class Stopping:
    requested: bool = False
    keep_jobs: bool = False
    asked: bool = False     # the supervisor was told (once)


class Troubles:
    """The daemon's steps failing now, for the people waiting on it (`gqa queue`, `status`, `wait`
    ask GET /health): a full disk that keeps jobs' ends from being recorded shows their jobs as
    running, and only the daemon's log said why. Held in memory: such a fault may allow no write."""

    SHOWN_AFTER = 5.0     # seconds a step fails before it is told: a lock held a moment is no trouble

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self._failing: dict[str, tuple[float, str]] = {}

    def failed(self, name: str, message: str) -> None:
        since = self._failing.get(name, (self.clock(), ""))[0]
        self._failing[name] = (since, message)

    def mended(self, name: str) -> None:
        self._failing.pop(name, None)

    def told(self) -> list[dict[str, object]]:
        now = self.clock()
        return [{"step": name, "since": since, "error": message[:300]}
                for name, (since, message) in self._failing.items() if now - since >= self.SHOWN_AFTER]


@dataclass
class Retry:
    """Backoff for a step that keeps failing, one log line per new error, and the failure told
    to `troubles` until the step works again."""

    name: str
    delay: float = 0.0
    at: float = 0.0
    last: str = ""
    troubles: Troubles | None = None

    def due(self, now: float) -> bool:
        return now >= self.at

    def failed(self, exc: BaseException, now: float) -> None:
        self.delay = min(MAX_BACKOFF, max(0.1, self.delay * 2))
        self.at = now + self.delay
        message = f"{type(exc).__name__}: {exc}"
        if self.troubles is not None:
            self.troubles.failed(self.name, message)
        if message != self.last:   # a full disk must not fill the log with the same line
            if isinstance(exc, GqaError):
                log.warning("%s failed, retrying: %s", self.name, exc)
            else:
                log.exception("%s failed, retrying", self.name)
            self.last = message

    def succeeded(self) -> None:
        if self.last:
            log.info("%s works again", self.name)
        if self.troubles is not None:
            self.troubles.mended(self.name)
        self.delay, self.last = 0.0, ""


@dataclass
class DaemonLoop:
    wiring: DaemonWiring
    server: RequestServer
    doorbell: Doorbell
    log_watch: LogWatch | None = None                 # caps running jobs' logs as they write
    observers: Observers | None = None                # GPU figures and the budget watch (observers.py)
    stopping: Stopping = field(default_factory=Stopping)
    steps: StepWatch = field(default_factory=StepWatch)   # the wall clock being set (services/clock_steps.py)
    following: Retry = field(default_factory=lambda: Retry("following the clock's step"))
    unchecked: bool = True   # a clock set while we were down: the first turn checks the adopted attempts' starts

    def run(self, ready: Callable[[], None] | None = None) -> None:
        supervisor, executor = self.wiring.supervisor, self.wiring.executor
        self.selector = selectors.DefaultSelector()
        stop_r, stop_w = os.pipe()
        os.set_blocking(stop_w, False)
        os.set_blocking(stop_r, False)
        signal.set_wakeup_fd(stop_w)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self._stop(keep_jobs=False))
        signal.signal(signal.SIGUSR2, lambda *_: self._stop(keep_jobs=True))
        self.selector.register(stop_r, selectors.EVENT_READ, lambda mask: drain(stop_r))
        self.selector.register(self.doorbell.fileno(), selectors.EVENT_READ, lambda mask: self.doorbell.drain())
        self.server.attach(self.selector)
        self.watched: set[int] = set()
        self.exits: list[Exit] = []
        troubles = self.wiring.troubles
        tick, settle = Retry("scheduling", troubles=troubles), Retry("recording exits", troubles=troubles)
        self.following.troubles = troubles
        next_prune = time.monotonic() + 5.0   # not in the start's way

        counts = supervisor.recover()
        for job in self.wiring.store.list([JobState.RUNNING]):  # re-adopted attempts
            executor.adopt(job)
        log.info("daemon %d up: %d GPUs, recovered %s", os.getpid(), len(self.wiring.inventory.gpus), counts)
        if ready is not None:
            ready()
        try:
            while True:
                now = time.monotonic()
                self._follow_clock(now)   # before a tick judges a wall time on a stepped clock
                if self.stopping.requested:
                    if self._shutting_down():
                        break
                elif tick.due(now):
                    try:
                        supervisor.tick()
                        tick.succeeded()
                    except FATAL as exc:   # the database is damaged or not ours any more: stop, jobs run on
                        log.error("stopping: %s", exc)
                        self._stop(keep_jobs=True)
                    except Exception as exc:   # the disk is full, the database locked too long: retry
                        tick.failed(exc, now)
                if self.observers is not None and not self.stopping.requested:
                    self.observers.run_due()
                executor.kill_overdue()
                self._sync_watches()
                if self.log_watch is not None:
                    self.log_watch.follow(executor.running_logs())
                timeout = self._timeout(tick)
                if timeout > 0 and not self.exits and not self.stopping.requested:
                    # after the tick's launches, and only while nothing else is due
                    keeper = self.wiring.queue_keeper
                    if keeper.refresh():
                        timeout = self._timeout(tick)
                    kept = keeper.wait()
                    timeout = timeout if kept is None else min(timeout, kept)
                for key, mask in self.selector.select(timeout):
                    key.data(mask)
                self._coalesce_exits()
                self.server.expire()
                executor.reap_strays()
                if self.exits:   # nor an end, collected in the turn the clock stepped, charged the step
                    self._follow_clock(time.monotonic())
                if self.exits and settle.due(time.monotonic()):
                    if self.observers is not None:
                        self.observers.ending(self.exits)
                    try:
                        supervisor.on_exits(self.exits)
                        self.exits = []
                        settle.succeeded()
                    except Exception as exc:   # keep them (their exit files stay) and try again
                        settle.failed(exc, time.monotonic())
                if time.monotonic() >= next_prune and not self.stopping.requested:
                    next_prune = time.monotonic() + self._prune()
        finally:
            signal.set_wakeup_fd(-1)
            self.server.close()
            self.doorbell.close()
            if self.observers is not None:
                self.observers.close()
            self.wiring.store.close()
            executor.close()
            log.info("daemon %d stopped", os.getpid())

    # -- parts ----------------------------------------------------------------------
    def _follow_clock(self, now: float) -> None:
        """Move what is in flight with a step of the wall clock (services/clock_steps.py)."""
        step = self.steps.stepped()
        if not (step or self.unchecked) or not self.following.due(now):
            return
        try:
            follow_clock(self.wiring.store, self.wiring.executor, self.wiring.clock.now(), step)
            self.steps.followed(step)
            self.unchecked = False
            self.following.succeeded()
        except Exception as exc:
            self.following.failed(exc, now)

    def _stop(self, *, keep_jobs: bool) -> None:
        if not self.stopping.requested:
            self.stopping.requested, self.stopping.keep_jobs = True, keep_jobs

    def _shutting_down(self) -> bool:
        """Tell the supervisor once; True once nothing is left to wait for."""
        if not self.stopping.asked:
            try:
                self.wiring.supervisor.shutdown(keep_jobs=self.stopping.keep_jobs)
            except GqaError as exc:   # a full disk, a locked database: one line, as every storage fault
                log.error("could not ask running jobs to stop: %s; leaving them running for the next daemon", exc)
                return True
            except Exception:   # the database is unreadable: the jobs keep running, the next daemon adopts them
                log.exception("could not ask running jobs to stop; leaving them running for the next daemon")
                return True
            self.stopping.asked = True
        return self.stopping.keep_jobs or self.wiring.executor.watched() == 0

    def _sync_watches(self) -> None:
        executor = self.wiring.executor
        current = set(executor.fds())
        for fd in self.watched - current:
            try:
                self.selector.unregister(fd)
            except (KeyError, ValueError):
                pass
        for fd in current - self.watched:
            self.selector.register(fd, selectors.EVENT_READ, lambda mask, fd=fd: self._collect(fd))
        self.watched = current

    def _collect(self, fd: int) -> None:
        # unregister before the fd is closed, so a reused fd number is never stale
        self.selector.unregister(fd)
        self.watched.discard(fd)
        ended = self.wiring.executor.collect(fd)
        if ended is not None:
            self.exits.append(ended)

    def _coalesce_exits(self) -> None:
        """Attempts released together end together: give the others a moment
        (COALESCE each, while more keep coming) so one pass serves them all,
        instead of a pass over the whole queue per exit."""
        if not self.exits:
            return
        for _ in range(COALESCE_ROUNDS):
            ready = self.selector.select(COALESCE)
            if not ready:
                return
            for key, mask in ready:
                key.data(mask)

    def _prune(self) -> float:
        """Delete a few batches of jobs past the retention; seconds to the next try."""
        retention = self.wiring.retention
        if retention is None:
            return PRUNE_EVERY
        try:
            deleted, more = retention.prune()
        except Exception as exc:   # the disk is full, the database locked: whole batches only, tried again later
            log.warning("could not delete finished jobs past the retention: %s", exc)
            return PRUNE_EVERY
        if deleted:
            log.info("deleted %d finished jobs kept past %g days", deleted, self.wiring.keep_history)
        return PRUNE_SOON if more else PRUNE_EVERY

    def _timeout(self, tick: Retry) -> float:
        now = time.monotonic()
        waits = [IDLE_CHECK]
        if self.stopping.requested:
            waits.append(0.2)
        else:
            if not tick.due(now):
                waits.append(tick.at - now)
            else:
                try:
                    deadline = self.wiring.supervisor.next_deadline()
                except Exception:
                    deadline = time.time() + 1.0
                if deadline is not None:
                    waits.append(max(0.0, deadline - time.time()))
        if self.exits:
            waits.append(0.5)
        due = self.observers.next_due() if self.observers is not None and not self.stopping.requested else None
        for extra in (self.wiring.executor.next_kill(), self.server.next_deadline(), due):
            if extra is not None:
                waits.append(extra)
        return max(0.0, min(waits))
