"""Real receivers for notices, started by the tests: an SMTP server
(aiosmtpd) and an HTTP server in a thread, each keeping what it was sent.
The HTTP one can be told to fail (500) or to hang without answering."""

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

    def __init__(self, port: int | None = None, login: tuple[str, str] | None = None):
        self.mails: list[EmailMessage] = []
        self.logins: list[str] = []   # the users that logged in
        self.port = port or free_port()
        receiver = self

        class Handler:
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
    "ok" (200), "fail" (500, body not kept) or "hang" (reads the request, never answers)."""

    def __init__(self, port: int | None = None, mode: str = "ok"):
        self.bodies: list[dict] = []
        self.mode = mode
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
                                        "json": json.loads(body)})
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
