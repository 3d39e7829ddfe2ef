"""How the local queue delivers a notice: e-mail through the SMTP server it
was started with, or a POST of Slack's {"text": ...} to a webhook. Each has
a short timeout, so a receiver that hangs costs the sender that long and the
queue nothing (the sender is a thread of its own).

Whom: the notice's `to` (an address, or an http(s) URL), else its user's
address: `<user>@<mail_domain>` (Slurm's MailDomain), else the default
webhook. Alerts and approval requests go to `alerts_to`.

The settings reach the daemon in a file of the state home only its user may
read (`write_settings`, `read_settings`), never on its command line: a
webhook's URL is its password, and every user of the machine sees a
process's arguments. For the same reason a URL is logged as its scheme and
host alone (`redacted`)."""

from __future__ import annotations

import json
import os
import tempfile
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path

from ...models.errors import SpecError
from ...models.notice_targets import address_problem, target_problem, webhook_problem
from ...models.notices import Notice, channel_of

SETTINGS_FILE = "notices.json"   # in the state home, mode 0600: the daemon's --notices-file


@dataclass(frozen=True)
class NoticeSettings:
    """What `gqa local start` was told about delivering notices (all optional)."""

    smtp: str | None = None             # HOST:PORT
    mail_from: str | None = None
    starttls: bool = False
    login_file: str | None = None       # a private file whose first line is USER:PASSWORD
    mail_domain: str | None = None      # <owner>@<mail_domain> when a job names no address
    webhook: str | None = None          # the default webhook when a job names none and there is no domain
    alerts_to: str | None = None        # alerts and approval requests: an address or a webhook URL

    def __post_init__(self) -> None:
        if self.smtp is not None:
            host, _, port = self.smtp.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise SpecError(f"--smtp {self.smtp!r}: give HOST:PORT, e.g. localhost:25")
            if not self.mail_from or "@" not in self.mail_from:
                raise SpecError("--smtp needs --mail-from ADDRESS (the sender of the notices)")
        if self.webhook is not None and webhook_problem(self.webhook):
            raise SpecError(f"--webhook {self.webhook!r}: {webhook_problem(self.webhook)}")
        if self.mail_domain is not None:
            if address_problem(f"gqa@{self.mail_domain}"):
                raise SpecError(f"--mail-domain {self.mail_domain!r}: give a domain, e.g. example.org")
            if not self.smtp:
                raise SpecError("--mail-domain mails notices: it needs --smtp HOST:PORT and --mail-from ADDRESS "
                                "(without them no notice is delivered)")
        if self.alerts_to is not None:
            self._check_alerts_to(self.alerts_to)
        if self.login_file is not None:
            login_of(self.login_file)   # refused at start, not at the first notice

    def _check_alerts_to(self, to: str) -> None:
        """An address (mailed through --smtp), a webhook URL, or a user name mailed at --mail-domain."""
        problem = target_problem(to)
        if problem:   # on the starting user's own terminal: the whole of it, to see what is wrong
            raise SpecError(f"--alerts-to {to!r}: {problem}")
        kind = channel_of(to)
        if kind == "email" and not self.smtp:
            raise SpecError(f"--alerts-to {to!r} is an address: it needs --smtp HOST:PORT and --mail-from ADDRESS "
                            "(without them no alert is delivered)")
        if kind == "user" and not self.mail_domain:
            raise SpecError(f"--alerts-to {to!r} is a user name: it is mailed at --mail-domain, which needs "
                            "--smtp (or give an address or a webhook URL)")

    def text(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v not in (None, False)})

    def describe(self) -> str:
        ways = ([f"e-mail through {self.smtp}" + (" (STARTTLS)" if self.starttls else "")] if self.smtp else []) + \
               ([f"webhook {redacted(self.webhook)}"] if self.webhook else [])
        alerts = ""
        if self.alerts_to:
            alerts = "; alerts to " + (redacted(self.alerts_to) if channel_of(self.alerts_to) == "webhook"
                                       else self.alerts_to)
        if ways:
            return "notices: " + ", ".join(ways) + alerts
        # skipped for good: a daemon started later with a channel sends no backlog of stale notices
        return ("notices: no channel configured (--smtp, --webhook): a job's notices go only to a webhook URL "
                "the job names; the others are marked skipped and never sent, not even after a restart with one"
                + alerts)

    def recipient(self, notice: Notice) -> str | None:
        """Where a notice goes; None when nobody can be reached."""
        to = notice.to
        if notice.event not in ("begin", "end", "fail", "requeue"):   # an alert or approval request
            to = to or self.alerts_to
            if not to:
                return None
        if to and channel_of(to) != "user":
            return to
        user = to or notice.user
        if self.mail_domain:
            return f"{user}@{self.mail_domain}"
        return self.webhook


def redacted(url: str) -> str:
    """A URL as logs, errors and start lines show it: its scheme, host and port (a webhook's path is
    its secret, and a user:password is never shown either)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:                        # e.g. an unclosed `[` of an IPv6 host
        return "a URL (not shown)"
    host = parts.netloc.rpartition("@")[2]
    if not host or not host.isprintable():
        return "a URL (not shown)"
    return f"{parts.scheme.lower()}://{host}/…"


def settings_file(home: Path | str) -> Path:
    return Path(home) / SETTINGS_FILE


def write_settings(home: Path | str, settings: NoticeSettings) -> Path | None:
    """The settings where the daemon reads them (its --notices-file), readable by this user alone:
    written whole to a private temporary file and renamed into place, so a reader never sees half
    of it. None, and any old file removed, when there are none."""
    path = settings_file(home)
    text = settings.text()
    if text == "{}":
        path.unlink(missing_ok=True)
        return None
    fd, temporary = tempfile.mkstemp(prefix=".notices-", dir=path.parent)   # mode 0600 whatever the umask
    try:
        with os.fdopen(fd, "w") as file:
            file.write(text + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def read_settings(path: Path | str | None) -> NoticeSettings:
    """The settings `write_settings` left (none without a path); a file others may read, or one
    that is not whole, is a SpecError naming it."""
    if path is None:
        return NoticeSettings()
    try:
        with open(path) as file:
            if os.fstat(file.fileno()).st_mode & 0o077:
                raise SpecError(f"{path} may be read by others (it may hold webhook URLs); chmod 600 {path}")
            text = file.read()
    except OSError as exc:
        raise SpecError(f"cannot read the notice settings {path}: {exc.strerror}") from None
    try:
        given = json.loads(text)
    except ValueError:
        raise SpecError(f"{path}: not the notice settings `gqa local start` writes (not JSON)") from None
    if not isinstance(given, dict) or not set(given) <= set(NoticeSettings.__dataclass_fields__):
        raise SpecError(f"{path}: not the notice settings `gqa local start` writes")
    return NoticeSettings(**given)


def login_of(path: str) -> tuple[str, str]:
    """USER:PASSWORD from the first line of a file nobody else may read."""
    file = Path(path)
    try:
        if file.stat().st_mode & 0o077:
            raise SpecError(f"{path} may be read by others; chmod 600 {path} (it holds the SMTP password)")
        line = file.read_text().splitlines()[0] if file.read_text().strip() else ""
    except OSError as exc:
        raise SpecError(f"cannot read the SMTP login file {path}: {exc.strerror}") from None
    user, sep, password = line.partition(":")
    if not sep or not user:
        raise SpecError(f"{path}: its first line must be USER:PASSWORD")
    return user, password
