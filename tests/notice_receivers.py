"""Real receivers for notices, started by the tests: an SMTP server
(aiosmtpd) and an HTTP server in a thread, each keeping what it was sent.
The HTTP one can be told to fail (500), to hang without answering or to
answer late; the SMTP one to refuse some recipients."""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
import time
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


def free_port() -> int:
    """A port nothing listens on (a receiver that is down: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MailReceiver:
    """An SMTP server on 127.0.0.1; `mails` is what it accepted, parsed."""

    def __init__(self, port: int | None = None, login: tuple[str, str] | None = None,
                 refuse: dict[str, str] | None = None):
        """`refuse`: address -> the server's reply to its RCPT TO (e.g. "550 5.1.1 no such user")."""
        self.mails: list[EmailMessage] = []
        refused = dict(refuse or {})
        self.logins: list[str] = []   # the users that logged in
        self.port = port or free_port()
        receiver = self

        class Handler:
            async def handle_RCPT(self, server, session, envelope, address, rcpt_options):   # noqa: N802
                if address in refused:
                    return refused[address]
                envelope.rcpt_tos.append(address)
                return "250 OK"

            async def handle_DATA(self, server, session, envelope):   # noqa: N802 (aiosmtpd's name)
                message = email.message_from_bytes(envelope.content, policy=email.policy.default)
                receiver.mails.append(message)   # type: ignore[arg-type]
                return "250 OK"

        def authenticator(server, session, envelope, mechanism, data):
            ok = login is not None and (data.login.decode(), data.password.decode()) == login
            if ok:
                receiver.logins.append(data.login.decode())
            return AuthResult(success=ok)

        # with a login: AUTH is offered (over plain text: a test on loopback) and required
        extra = dict(authenticator=authenticator, auth_require_tls=False, auth_required=True) if login else {}
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, **extra)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "MailReceiver":
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()

    def wait_for(self, count: int, timeout: float = 20.0) -> list[EmailMessage]:
        return _wait(lambda: self.mails, count, timeout, "mails")


class HookReceiver:
    """An HTTP server on 127.0.0.1 keeping each POSTed JSON body. `mode`:
    "ok" (200), "fail" (500, body not kept), "hang" (reads the request, never answers) or
    "slow" (keeps the body, answers 200 after `delay` seconds). Each body is kept with its
    path, Content-Type and Idempotency-Key header ("key")."""

    def __init__(self, port: int | None = None, mode: str = "ok", delay: float = 0.0):
        self.bodies: list[dict] = []
        self.mode, self.delay = mode, delay
        self.released = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):   # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if receiver.mode == "hang":
                    receiver.released.wait(30)
                    return
                if receiver.mode == "fail":
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.bodies.append({"path": self.path, "type": self.headers.get("Content-Type"),
                                        "key": self.headers.get("Idempotency-Key"), "json": json.loads(body)})
                if receiver.mode == "slow":
                    receiver.released.wait(receiver.delay)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> "HookReceiver":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 20.0) -> list[dict]:
        return _wait(lambda: self.bodies, count, timeout, "webhook bodies")


def _wait(got, count: int, timeout: float, what: str) -> list:
    deadline = time.monotonic() + timeout
    while len(got()) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {count} {what}, got {len(got())}: {got()!r}")
        time.sleep(0.05)
    return list(got())
