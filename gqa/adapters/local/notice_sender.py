"""The daemon's notice sender: a thread of its own that reads the outbox
(notice_outbox.py), builds each notice (models/notices.py) and delivers it
(notice_delivery.py). The control loop never waits on it: a mail server
that is down or hangs delays notices, never a job's start or end.

Each recipient has a lane: one send at a time, in a thread of its own, so a
receiver that hangs until its timeout holds up its own notices only (at most
MAX_LANES receivers are sent to at once). The outbox is read and written by
the sender's thread alone; a lane only sends.

Each notice is tried after a backoff doubling from 0.5 s to 5 minutes and
dropped, with a log line, after MAX_TRIES; one log line per new error, not
per try. Any error sending one notice is that notice's failed try, never the
round's; one that can never succeed (a URL nothing can be sent to, a mail
server's 5xx for the recipient) gives up at once with its reason. A log
line names a webhook by its scheme and host, never its secret path."""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...models.errors import BackendUnavailable
from ...models.job import JobState
from ...models.notices import Notice, job_notice
from .notice_channels import NoticeSettings
from .notice_delivery import Undeliverable, deliver, shown
from .notice_outbox import MAX_TRIES, NoticeOutbox, Pending, backoff

log = logging.getLogger("gqa.notices")
POLL = 0.5        # seconds between looks at the outbox when no send ends sooner
MAX_LANES = 16    # recipients sent to at once


@dataclass(frozen=True)
class _Try:
    """A send in flight in a recipient's lane."""
    pending: Pending
    notice: Notice
    to: str
    tries: int
    at: float


class NoticeSender:
    def __init__(self, db: Path | str, settings: NoticeSettings, *, clock: Callable[[], float] = time.time,
                 send: Callable[[Notice, str, NoticeSettings], None] = deliver):
        self.db, self.settings, self.clock, self.send = db, settings, clock, send
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error = ""
        self._in_flight: dict[str, _Try] = {}      # recipient -> the send its lane is making
        self._resting: dict[str, float] = {}       # recipient whose last try failed -> its next try
        self._ended: queue.Queue[tuple[_Try, BaseException | None]] = queue.Queue()
        self.outbox: NoticeOutbox | None = None

    def start(self) -> None:
        # the outbox (and its trigger) exists before the first job moves, opened here, not in the thread
        self.outbox = NoticeOutbox(self.db)
        self._thread = threading.Thread(target=self._run, name="gqa-notices", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the thread to stop; a send in flight is left to its timeout (the
        daemon exits without it: the notice is tried once more by the next one)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        assert self.outbox is not None
        while not self._stop.is_set():
            try:
                self.pump(POLL)
            except Exception:   # the database locked too long, the disk full: said, tried again
                log.exception("notices: reading the outbox failed; trying again")
                self._stop.wait(5.0)

    def pump(self, wait: float) -> int:
        """One round: record the sends that ended, start the due ones whose recipient's lane is
        free, then wait up to `wait` seconds: for a send to end, or, with none in flight, idle
        (the outbox is looked at again then). How many went out."""
        sent = self._collect(0.0)
        self._dispatch()
        if self._in_flight:
            return sent + self._collect(wait)
        self._stop.wait(wait)
        return sent

    def deliver_due(self) -> int:
        """Deliver what is due now and wait for every send it started; how many went out. Each
        recipient's notices go one after another in its lane, the lanes side by side; once a
        recipient fails, its other notices wait for its next try (`defer`), untried and uncounted."""
        sent = 0
        while not self._stop.is_set():
            sent += self._collect(0.0)
            self._dispatch()
            if not self._in_flight:
                return sent
            sent += self._collect(None)
        return sent

    def _dispatch(self) -> None:
        """Start the first due notice of each recipient whose lane is free."""
        assert self.outbox is not None
        now = self.clock()
        resting: dict[str, list[int]] = {}
        for pending in self.outbox.due(now):
            if self._stop.is_set() or len(self._in_flight) >= MAX_LANES:
                break
            if any(flight.pending.id == pending.id for flight in self._in_flight.values()):
                continue
            ready = self._prepare(pending)
            if ready is None:
                continue
            notice, to = ready
            if self._resting.get(to, 0.0) > now:
                resting.setdefault(to, []).append(pending.id)
                continue
            if to in self._in_flight:
                continue                          # its lane's next, once the send in it ends
            flight = _Try(pending, notice, to, self.outbox.trying(pending, now), now)
            self._in_flight[to] = flight
            threading.Thread(target=self._lane, args=(flight,), name="gqa-notice-lane", daemon=True).start()
        for to, ids in resting.items():
            self.outbox.defer(ids, self._resting[to])

    def _lane(self, flight: _Try) -> None:
        try:
            self.send(flight.notice, flight.to, self.settings)
        except BaseException as exc:             # recorded by the sender's thread, whatever it is
            self._ended.put((flight, exc))
        else:
            self._ended.put((flight, None))

    def _collect(self, wait: float | None) -> int:
        """Record the sends that ended (waiting up to `wait` seconds for the first, None: until
        one ends); how many went out."""
        sent = 0
        try:
            ended = [self._ended.get(timeout=wait) if wait != 0.0 else self._ended.get_nowait()]
        except queue.Empty:
            return 0
        while True:
            try:
                ended.append(self._ended.get_nowait())
            except queue.Empty:
                break
        for flight, error in ended:
            del self._in_flight[flight.to]
            sent += self._record(flight, error)
        return sent

    def _prepare(self, pending: Pending) -> tuple[Notice, str] | None:
        """The notice and its recipient; None when it is finished here (nothing to send, nobody
        to send to) or could not be built (its failed try)."""
        assert self.outbox is not None
        try:
            notice = self._notice(pending)
            if notice is None:
                self.outbox.finished(pending, self.clock(), "skipped")
                return None
            to = self.settings.recipient(notice)
        except sqlite3.Error:
            raise                                # the outbox's, not this notice's: the round is tried again
        except Exception as exc:                 # this notice's alone: a try that failed
            tries = self.outbox.trying(pending, self.clock())
            self._failed(pending, pending.key, None, tries, f"building the notice failed: {_said(exc)}", exc)
            return None
        if to is None:
            self.outbox.finished(pending, self.clock(), "skipped",
                                 "nobody to send to: no address, --mail-domain or --webhook")
            return None
        return notice, to

    def _record(self, flight: _Try, exc: BaseException | None) -> int:
        """A send that ended: 1 when it went out, else 0 (given up, or its recipient rests until
        its backoff ends)."""
        assert self.outbox is not None
        pending, notice, to, tries = flight.pending, flight.notice, flight.to, flight.tries
        if exc is None:
            if self._last_error:
                log.info("notices: delivered again")
                self._last_error = ""
            self._resting.pop(to, None)
            self.outbox.finished(pending, self.clock(), "sent")
            return 1
        if isinstance(exc, Undeliverable):       # never deliverable as it is: given up now, with its reason
            error = _hidden(str(exc), to)
            log.warning("notices: gave up on %s to %s: %s", notice.key, shown(to), error)
            self.outbox.finished(pending, self.clock(), "gave up", error[:500])
            return 0
        said = str(exc) if isinstance(exc, BackendUnavailable) else _said(exc)
        self._resting[to] = flight.at + backoff(tries)
        self._failed(pending, notice.key, to, tries, _hidden(said, to),
                     None if isinstance(exc, BackendUnavailable) else exc)
        return 0

    def _failed(self, pending: Pending, key: str, to: str | None, tries: int, error: str,
                exc: BaseException | None = None) -> None:
        assert self.outbox is not None
        whom = shown(to) if to else "its recipient"
        if tries >= MAX_TRIES:
            log.warning("notices: gave up on %s to %s after %d tries: %s", key, whom, tries, error)
            self.outbox.finished(pending, self.clock(), "gave up", error[:500])
            return
        if error != self._last_error:
            # an unexpected error's traceback, once: a defect to report, not a receiver down
            log.warning("notices: %s to %s not delivered (try %d of %d), retrying: %s", key, whom, tries,
                        MAX_TRIES, error, exc_info=exc)
            self._last_error = error
        self.outbox.failed(pending, error)

    def _notice(self, pending: Pending) -> Notice | None:
        assert self.outbox is not None
        if pending.kind != "job":
            return Notice(pending.key, pending.kind, pending.recipient, "", pending.team, pending.subject or "",
                          pending.message or "")
        job = self.outbox.job(pending.job_id or "")
        if job is None or pending.state is None:
            return None
        return job_notice(job, JobState(pending.state), pending.at, pending.reason, pending.attempt)


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _hidden(error: str, to: str) -> str:
    """An error's words without the recipient's whole URL (its path is the hook's secret)."""
    return error.replace(to, shown(to)) if shown(to) != to else error
