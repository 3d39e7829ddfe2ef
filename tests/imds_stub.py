"""A stand-in for the EC2 instance metadata service (IMDSv2) on 127.0.0.1:
PUT /latest/api/token gives a session token (refused without the TTL
header), every read needs it (401 without), instance-life-cycle says spot,
and spot/instance-action is 404 until `post()` puts a notice there.
`requests` keeps what it was asked, in order."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def notice_text(at: float, action: str = "terminate") -> str:
    """spot/instance-action's body for an interruption due at epoch `at`."""
    when = datetime.fromtimestamp(int(at), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps({"action": action, "time": when})


class MetadataStub:
    def __init__(self, *, lifecycle: str = "spot", token_status: int = 200) -> None:
        self.lifecycle = lifecycle
        self.token_status = token_status           # e.g. 403: the service refuses tokens
        self.requests: list[tuple[str, str, str | None]] = []   # (method, path, token sent)
        self.tokens: list[str] = []                # issued, in order; only the last is valid
        self._notice: Callable[[], str | None] = lambda: None
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self):   # noqa: N802 (http.server's name)
                stub.requests.append(("PUT", self.path, None))
                ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
                if self.path != "/latest/api/token" or not ttl.isdigit():
                    return self._answer(400, "")
                if stub.token_status != 200:
                    return self._answer(stub.token_status, "")
                stub.tokens.append(f"token-{sum(t.startswith('token-') for t in stub.tokens) + 1}")
                self._answer(200, stub.tokens[-1])

            def do_GET(self):   # noqa: N802
                token = self.headers.get("X-aws-ec2-metadata-token")
                stub.requests.append(("GET", self.path, token))
                if not stub.tokens or token != stub.tokens[-1]:
                    return self._answer(401, "")
                if self.path == "/latest/meta-data/instance-life-cycle":
                    return self._answer(200, stub.lifecycle)
                body = stub._notice() if self.path == "/latest/meta-data/spot/instance-action" else None
                self._answer(404, "") if body is None else self._answer(200, body)

            def _answer(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def post(self, text: str | Callable[[], str | None]) -> None:
        """Put a notice at spot/instance-action: its body, or what to answer at each read
        (None: still 404)."""
        self._notice = text if callable(text) else (lambda: text)

    def reads(self, path: str = "/latest/meta-data/spot/instance-action") -> int:
        return sum(1 for method, p, _ in self.requests if method == "GET" and p == path)

    def expire_tokens(self) -> None:
        """The service forgets its tokens (they lapsed, or it restarted): the next read gets 401."""
        self.tokens.append(f"unknown-{time.monotonic()}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
