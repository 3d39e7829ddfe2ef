"""The daemon's notice sender: a thread of its own that reads the outbox
(notice_outbox.py), builds each notice (models/notices.py) and delivers it
(notice_channels.py). The control loop never waits on it: a mail server
that is down or hangs delays notices, never a job's start or end.

Each notice is tried after a backoff doubling from 0.5 s to 5 minutes and
dropped, with a log line, after MAX_TRIES; one log line per new error, not
per try."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ...models.errors import BackendUnavailable
from ...models.job import JobState
from ...models.notices import Notice, job_notice
from .notice_channels import NoticeSettings, deliver
from .notice_outbox import MAX_TRIES, NoticeOutbox, Pending

log = logging.getLogger("gqa.notices")
POLL = 0.5   # seconds between looks at the outbox when nothing is due sooner


class NoticeSender:
    def __init__(self, db: Path | str, settings: NoticeSettings, *, clock: Callable[[], float] = time.time,
                 send: Callable[[Notice, str, NoticeSettings], None] = deliver):
        self.db, self.settings, self.clock, self.send = db, settings, clock, send
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error = ""
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
        """Deliver every notice due now; how many went out."""
        assert self.outbox is not None
        sent = 0
        for pending in self.outbox.due(self.clock()):
            if self._stop.is_set():
                break
            sent += self._deliver(pending)
        return sent

    def _deliver(self, pending: Pending) -> int:
        assert self.outbox is not None
        notice = self._notice(pending)
        now = self.clock()
        if notice is None:
            self.outbox.finished(pending, now, "skipped")
            return 0
        to = self.settings.recipient(notice)
        if to is None:
            self.outbox.finished(pending, now, "skipped", "nobody to send to: no address, --mail-domain or --webhook")
            return 0
        tries = self.outbox.trying(pending, now)
        try:
            self.send(notice, to, self.settings)
        except BackendUnavailable as exc:
            if tries >= MAX_TRIES:
                log.warning("notices: gave up on %s to %s after %d tries: %s", notice.key, to, tries, exc)
                self.outbox.finished(pending, self.clock(), "gave up", str(exc))
            else:
                if str(exc) != self._last_error:
                    log.warning("notices: %s not delivered (try %d of %d), retrying: %s", notice.key, tries,
                                MAX_TRIES, exc)
                    self._last_error = str(exc)
                self.outbox.failed(pending, str(exc))
            return 0
        if self._last_error:
            log.info("notices: delivered again")
            self._last_error = ""
        self.outbox.finished(pending, self.clock(), "sent")
        return 1

    def _notice(self, pending: Pending) -> Notice | None:
        assert self.outbox is not None
        if pending.kind != "job":
            return Notice(pending.key, pending.kind, pending.recipient, "", pending.team, pending.subject or "",
                          pending.message or "")
        job = self.outbox.job(pending.job_id or "")
        if job is None or pending.state is None:
            return None
        return job_notice(job, JobState(pending.state), pending.at, pending.reason, pending.attempt)
