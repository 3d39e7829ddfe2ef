"""How the local queue delivers a notice: e-mail through the SMTP server it
was started with, or a POST of Slack's {"text": ...} to a webhook. Each has
a short timeout, so a receiver that hangs costs the sender that long and the
queue nothing (the sender is a thread of its own).

Whom: the notice's `to` (an address, or an http(s) URL), else its user's
address: `<user>@<mail_domain>` (Slurm's MailDomain), else the default
webhook. Alerts and approval requests go to `alerts_to`."""

from __future__ import annotations

import json
import smtplib
import ssl
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path

from ...models.errors import BackendUnavailable, SpecError
from ...models.notices import Notice, channel_of

SMTP_TIMEOUT = 10.0     # seconds for the connection and each command
WEBHOOK_TIMEOUT = 5.0


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
        if self.webhook and channel_of(self.webhook) != "webhook":
            raise SpecError(f"--webhook {self.webhook!r}: give an http:// or https:// URL")
        if self.login_file is not None:
            login_of(self.login_file)   # refused at start, not at the first notice

    def text(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v not in (None, False)})

    @classmethod
    def from_text(cls, text: str) -> "NoticeSettings":
        return cls(**json.loads(text)) if text else cls()

    def describe(self) -> str:
        ways = ([f"e-mail through {self.smtp}" + (" (STARTTLS)" if self.starttls else "")] if self.smtp else []) + \
               ([f"webhook {self.webhook}"] if self.webhook else [])
        if ways:
            return "notices: " + ", ".join(ways)
        # skipped for good: a daemon started later with a channel sends no backlog of stale notices
        return ("notices: no channel configured (--smtp, --webhook): a job's notices go only to a webhook URL "
                "the job names; the others are marked skipped and never sent, not even after a restart with one")

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


def deliver(notice: Notice, to: str, settings: NoticeSettings) -> None:
    """Send it once; BackendUnavailable (with the receiver's words) when it was not taken."""
    if channel_of(to) == "webhook":
        post_webhook(to, notice.slack)
    else:
        send_mail(notice, to, settings)


def post_webhook(url: str, body: dict, timeout: float = WEBHOOK_TIMEOUT) -> None:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "gqa"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:   # noqa: S310 (the URL's scheme is checked)
            if not 200 <= answer.status < 300:
                raise BackendUnavailable(f"webhook {url} answered {answer.status}")
    except urllib.error.HTTPError as exc:
        raise BackendUnavailable(f"webhook {url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BackendUnavailable(f"webhook {url} unreachable: {reason}") from None


def send_mail(notice: Notice, to: str, settings: NoticeSettings, timeout: float = SMTP_TIMEOUT) -> None:
    if not settings.smtp or not settings.mail_from:
        raise BackendUnavailable(f"no SMTP server to mail {to} (gqa local start --smtp HOST:PORT --mail-from ...)")
    host, _, port = settings.smtp.rpartition(":")
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = settings.mail_from, to, notice.subject
    mail["Date"] = formatdate(localtime=False)
    # the notice's key in the id: a mail sent twice (a daemon killed mid-send) is one thread to a reader
    mail["Message-ID"] = make_msgid(idstring=notice.key.replace(".", "-"), domain="gqa")
    mail["X-Gqa-Event"] = notice.event
    mail.set_content(notice.text + "\n")
    try:
        with smtplib.SMTP(host, int(port), timeout=timeout) as smtp:
            if settings.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if settings.login_file:
                smtp.login(*login_of(settings.login_file))
            smtp.send_message(mail)
    except (smtplib.SMTPException, OSError) as exc:
        raise BackendUnavailable(f"SMTP {settings.smtp}: {exc}") from None
