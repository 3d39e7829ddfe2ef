"""The daemon's notice sender: a thread of its own that reads the outbox
(notice_outbox.py), builds each notice (models/notices.py) and delivers it
(notice_delivery.py). The control loop never waits on it: a mail server
that is down or hangs delays notices, never a job's start or end.

Each notice is tried after a backoff doubling from 0.5 s to 5 minutes and
dropped, with a log line, after MAX_TRIES; one log line per new error, not
per try. Any error sending one notice is that notice's failed try, never the
round's; one that can never succeed (a URL nothing can be sent to, a mail
server's 5xx for the recipient) gives up at once with its reason. A log
line names a webhook by its scheme and host, never its secret path."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ...models.errors import BackendUnavailable
from ...models.job import JobState
from ...models.notices import Notice, job_notice
from .notice_channels import NoticeSettings
from .notice_delivery import Undeliverable, deliver, shown
from .notice_outbox import MAX_TRIES, NoticeOutbox, Pending, backoff

log = logging.getLogger("gqa.notices")
POLL = 0.5   # seconds between looks at the outbox when nothing is due sooner


class NoticeSender:
    def __init__(self, db: Path | str, settings: NoticeSettings, *, clock: Callable[[], float] = time.time,
                 send: Callable[[Notice, str, NoticeSettings], None] = deliver):
        self.db, self.settings, self.clock, self.send = db, settings, clock, send
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error = ""
        self._failing: set[str] = set()   # the recipients whose last try failed: last in a batch
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
                self.deliver_due()
                wait = POLL
            except Exception:   # the database locked too long, the disk full: said, tried again
                log.exception("notices: reading the outbox failed; trying again")
                wait = 5.0
            self._stop.wait(wait)

    def deliver_due(self) -> int:
        """Deliver the notices due now; how many went out. One recipient never holds up the
        others: the outbox hands out fresh notices before retries (by when each is due), the
        recipients whose last try failed come last in the batch, and once a recipient fails in a
        batch its other notices wait for its next try (`defer`), untried and uncounted."""
        assert self.outbox is not None
        batch = [ready for pending in self.outbox.due(self.clock()) if (ready := self._prepare(pending))]
        batch.sort(key=lambda ready: ready[2] in self._failing)       # stable: due order otherwise
        failed_at: dict[str, float] = {}        # a recipient that failed in this batch -> its next try
        held: dict[str, list[int]] = {}
        sent = 0
        for pending, notice, to in batch:
            if self._stop.is_set():
                break
            if to in failed_at:
                held.setdefault(to, []).append(pending.id)
                continue
            retry_at = self._send(pending, notice, to)
            if retry_at is None:
                sent += 1
            else:
                failed_at[to] = retry_at
        for to, ids in held.items():
            self.outbox.defer(ids, failed_at[to])
        return sent

    def _prepare(self, pending: Pending) -> tuple[Pending, Notice, str] | None:
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
        return pending, notice, to

    def _send(self, pending: Pending, notice: Notice, to: str) -> float | None:
        """One try: None when it went out, else when this recipient may be tried again."""
        assert self.outbox is not None
        now = self.clock()
        tries = self.outbox.trying(pending, now)
        try:
            self.send(notice, to, self.settings)
        except Undeliverable as exc:             # never deliverable as it is: given up now, with its reason
            error = _hidden(str(exc), to)
            log.warning("notices: gave up on %s to %s: %s", notice.key, shown(to), error)
            self.outbox.finished(pending, self.clock(), "gave up", error[:500])
            self._failing.discard(to)
            return now
        except BackendUnavailable as exc:
            self._failed(pending, notice.key, to, tries, _hidden(str(exc), to))
            return now + backoff(tries)
        except Exception as exc:                 # any other error is this notice's failed try, never the batch's
            self._failed(pending, notice.key, to, tries, _hidden(_said(exc), to), exc)
            return now + backoff(tries)
        if self._last_error:
            log.info("notices: delivered again")
            self._last_error = ""
        self._failing.discard(to)
        self.outbox.finished(pending, self.clock(), "sent")
        return None

    def _failed(self, pending: Pending, key: str, to: str | None, tries: int, error: str,
                exc: BaseException | None = None) -> None:
        assert self.outbox is not None
        whom = shown(to) if to else "its recipient"
        if to:
            self._failing.add(to)
        if tries >= MAX_TRIES:
            log.warning("notices: gave up on %s to %s after %d tries: %s", key, whom, tries, error)
            self.outbox.finished(pending, self.clock(), "gave up", error[:500])
            return
        if error != self._last_error:
            # an unexpected error's traceback, once: a defect to report, not a receiver down
            log.warning("notices: %s to %s not delivered (try %d of %d), retrying: %s", key, whom, tries,
                        MAX_TRIES, error, exc_info=exc if exc is not None and not isinstance(
                            exc, BackendUnavailable) else None)
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
