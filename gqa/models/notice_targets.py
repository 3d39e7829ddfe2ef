"""Where a notice may be sent, checked where it is asked for (a job's
notify.to, `gqa local start --webhook/--alerts-to`), not where it is sent:
a target no sender can use would fail at every try and reach no one.

- a webhook: an http(s) URL with a host, a port in 1..65535 where one is
  given, and ASCII throughout (anything else percent-encoded, %XX);
- an address: one plain `local@domain` (no display name, no `mailto:`,
  no list);
- a user name: mailed at the queue's mail domain (or on AWS, its subscription).

Pure: `target_problem` says what is wrong, or None."""

from __future__ import annotations

import re
import urllib.parse

# RFC 5322's dot-atom for the local part; a domain of LDH labels (a single label too: `ana@localhost`)
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
ADDRESS_RE = re.compile(rf"^{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})*$")
USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\$?$")   # a POSIX user name (a Samba machine's `$` too)
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")                    # a % that starts no %XX
MAX_ADDRESS = 254


def is_webhook(to: str) -> bool:
    return to.lower().startswith(("https://", "http://"))


def webhook_problem(url: str) -> str | None:
    """Why `url` is no webhook a sender can POST to; None when it is one."""
    if not is_webhook(url):
        return "give an http:// or https:// URL"
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        return "a URL is ASCII, without spaces: percent-encode the rest (%C3%A9)"
    if _ESCAPE.search(url):
        return "a % in a URL starts a %XX escape"
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:       # an unclosed [IPv6 address
        return f"not a URL: {exc}"
    if not parts.hostname:
        return "the URL names no host"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "the URL's port must be a number from 1 to 65535"
    return None


def address_problem(address: str) -> str | None:
    """Why `address` is not one plain local@domain address; None when it is."""
    if len(address) > MAX_ADDRESS or not ADDRESS_RE.match(address):
        return "give one e-mail address, local@domain (no name, no mailto:, no list)"
    return None


def target_problem(to: str) -> str | None:
    """Why `to` is not a webhook URL, an address or a user name; None when it is one of them."""
    if is_webhook(to) or "://" in to:
        return webhook_problem(to)
    if "@" in to or ":" in to:
        return address_problem(to)
    if not USER_RE.match(to):
        return "not an e-mail address (local@domain), a user name or an http(s):// webhook URL"
    return None
