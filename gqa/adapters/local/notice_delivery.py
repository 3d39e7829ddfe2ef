"""How the daemon's sender (notice_sender.py) delivers one notice: a POST of
Slack's {"text": ...} to a webhook, or a mail through the SMTP server of its
settings (notice_channels.NoticeSettings).

What each outcome means to the sender:
- it returns: the receiver took the notice;
- BackendUnavailable: not taken this time (refused, down, a 5xx, a 4xx from
  a mail server, no answer in time): tried again after a backoff;
- Undeliverable: can never be taken (a URL nothing can be sent to, a mail
  server's 5xx for the recipient or the message): given up at once, with
  the reason.

A webhook's POST carries the notice's key in an `Idempotency-Key` header,
so a receiver that had the body but whose answer came too late can drop
the repeat; the sender waits 5 s for a connection and 30 s for the answer
once connected, and words a late answer as one, not as a receiver down.
A webhook URL's path is a secret (Slack's /services/T/B/TOKEN): the words
of an error name its scheme and host only (`shown`)."""

from __future__ import annotations

import http.client
import json
import smtplib
import ssl
import urllib.error
import urllib.parse
import urllib.request
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from ...models.errors import BackendUnavailable
from ...models.notices import Notice, channel_of
from .notice_channels import NoticeSettings, login_of, redacted

CONNECT_TIMEOUT = 5.0   # seconds to connect to a webhook (and its TLS handshake)
ANSWER_TIMEOUT = 30.0   # seconds for its answer once connected: a slow receiver has the body already
SMTP_TIMEOUT = 10.0     # seconds for the mail server's connection and each command


class Undeliverable(Exception):
    """A notice that can never be delivered as it is; the words say why."""


def deliver(notice: Notice, to: str, settings: NoticeSettings) -> None:
    """Send it once (see the module's words for what each outcome means)."""
    if channel_of(to) == "webhook":
        post_webhook(to, notice.slack, notice.key)
    else:
        send_mail(notice, to, settings)


def shown(to: str) -> str:
    """How a recipient is named in a log line or an error: a webhook as `redacted` names it (never
    its path, the hook's secret), an address whole."""
    return redacted(to) if channel_of(to) == "webhook" else to


def checked_url(url: str) -> str:
    """The URL as it will be sent, or Undeliverable: a port that is no number, no host, a
    character an HTTP request line cannot carry (a space, a control, non-ASCII)."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port                                   # noqa: B018 (raises ValueError on a bad port)
    except ValueError as exc:
        raise Undeliverable(f"webhook {shown(url)}: not a URL that can be sent to ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise Undeliverable(f"webhook {shown(url)}: not an http(s) URL with a host")
    if not url.isascii() or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise Undeliverable(f"webhook {shown(url)}: the URL holds a space, a control or a non-ASCII "
                            "character; percent-encode it")
    return url


class _Connection(http.client.HTTPConnection):
    """Connects within the request's timeout (CONNECT_TIMEOUT), then waits ANSWER_TIMEOUT for each read."""

    answer_timeout = ANSWER_TIMEOUT

    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(self.answer_timeout)


class _SecureConnection(http.client.HTTPSConnection):
    answer_timeout = ANSWER_TIMEOUT

    def connect(self) -> None:
        super().connect()                              # the TCP connection and the TLS handshake
        self.sock.settimeout(self.answer_timeout)


def _opener(answer_timeout: float) -> urllib.request.OpenerDirector:
    """urllib's opener (proxies from the environment and all) whose connections wait
    `answer_timeout` for the answer once connected."""
    plain = type("_Plain", (_Connection,), {"answer_timeout": answer_timeout})
    secure = type("_Secure", (_SecureConnection,), {"answer_timeout": answer_timeout})

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(plain, req)

    class Secure(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(secure, req, context=ssl.create_default_context())

    return urllib.request.build_opener(Plain, Secure)


def post_webhook(url: str, body: dict, key: str, *, connect_timeout: float | None = None,
                 answer_timeout: float | None = None) -> None:
    """POST `body` as JSON with `key` in the Idempotency-Key header."""
    connect_timeout = CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
    answer_timeout = ANSWER_TIMEOUT if answer_timeout is None else answer_timeout
    where = shown(url)
    try:
        request = urllib.request.Request(checked_url(url), data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "User-Agent": "gqa",
                                                  "Idempotency-Key": key})
    except ValueError as exc:                           # urllib's own refusal of the URL
        raise Undeliverable(f"webhook {where}: not a URL that can be sent to ({exc})") from None
    try:
        with _opener(answer_timeout).open(request, timeout=connect_timeout) as answer:
            if not 200 <= answer.status < 300:
                raise BackendUnavailable(f"webhook {where} answered {answer.status}")
    except urllib.error.HTTPError as exc:
        raise BackendUnavailable(f"webhook {where} answered {exc.code}") from None
    except urllib.error.URLError as exc:                # no connection: refused, no route, a name unknown
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise BackendUnavailable(f"webhook {where} unreachable: no connection within {connect_timeout:g} s") \
                from None
        raise BackendUnavailable(f"webhook {where} unreachable: {reason}") from None
    except TimeoutError:                                # connected, the body sent: the answer was late
        raise BackendUnavailable(f"webhook {where} timed out: no answer within {answer_timeout:g} s "
                                 "of connecting (it may have the notice; the retry carries the same "
                                 "Idempotency-Key)") from None
    except (http.client.InvalidURL, UnicodeError, ValueError) as exc:
        raise Undeliverable(f"webhook {where}: not a URL that can be sent to ({exc})") from None
    except (http.client.HTTPException, OSError) as exc:   # connected, then closed or reset before answering
        raise BackendUnavailable(f"webhook {where} closed the connection without an answer: "
                                 f"{type(exc).__name__} {exc}".rstrip()) from None


def send_mail(notice: Notice, to: str, settings: NoticeSettings, timeout: float = SMTP_TIMEOUT) -> None:
    """Mail it; a 5xx for the recipient or the message is Undeliverable (the server's words),
    a 4xx or a server down BackendUnavailable."""
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
    except smtplib.SMTPRecipientsRefused as exc:
        said = "; ".join(f"{code} {_text(words)}" for code, words in exc.recipients.values())
        if exc.recipients and all(code >= 500 for code, _ in exc.recipients.values()):
            raise Undeliverable(f"SMTP {settings.smtp} refused {to}: {said}") from None
        raise BackendUnavailable(f"SMTP {settings.smtp} refused {to} for now: {said}") from None
    except smtplib.SMTPDataError as exc:                 # the message itself: 5xx for good, 4xx for now
        said = f"{exc.smtp_code} {_text(exc.smtp_error)}"
        if exc.smtp_code >= 500:
            raise Undeliverable(f"SMTP {settings.smtp} refused the mail to {to}: {said}") from None
        raise BackendUnavailable(f"SMTP {settings.smtp} refused the mail to {to} for now: {said}") from None
    except (smtplib.SMTPException, OSError) as exc:     # down, a login or sender refused (the settings): tried again
        raise BackendUnavailable(f"SMTP {settings.smtp}: {exc}") from None
    except (UnicodeError, ValueError) as exc:           # an address no SMTP command can carry
        raise Undeliverable(f"SMTP {settings.smtp}: cannot mail {to!r}: {exc}") from None


def _text(words: bytes | str) -> str:
    return words.decode(errors="replace") if isinstance(words, bytes) else str(words)
