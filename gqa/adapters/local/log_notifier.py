"""A Notifier that writes alerts to the daemon's log: where local alerts go
when no other delivery is set up."""

from __future__ import annotations

import logging

log = logging.getLogger("gqa.alerts")


class LogNotifier:
    def notify(self, subject: str, message: str, *, kind: str, team: str | None = None) -> None:
        log.warning("alert (%s%s): %s: %s", kind, f", team {team}" if team else "", subject, message)
