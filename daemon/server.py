"""The daemon's request socket (GQA_HOME/cli.sock), served from the event
loop without ever blocking it.

One request per connection: the client sends one JSON line
`{"v": 1, "method", "path", "query", "body"}` and reads one JSON line
`{"status", "body"}`. Who is calling comes from the socket's peer
credentials, never from the request. Sockets are non-blocking; a request
line is read as it arrives and a reply written as the client takes it, so
a slow or silent client costs a buffer, not the loop.

Back-pressure: at most MAX_CLIENTS connections are open at once, and on a
shared socket at most MAX_PER_USER of one user's (by its peer uid), so one
user's idle connections cannot lock out the others; one more is accepted
and answered at once with 503 "busy", a retry_after and why, which the
client honours (it retries with jitter), so a burst of clients queues in
their own processes instead of in "lost contact" errors.

A request whose client has hung up before it was read (a daemon that was
stopped, or too slow, and a client that gave up) is dropped unanswered,
never carried out: the client was told it failed.

Deadlines: a client has REQUEST_TIMEOUT from its connection to send its
request. Carrying it out is not timed (the client waits as long as it
chooses), and an answer, however large (a 100,000-task array's), is sent
for as long as the client keeps taking it: a connection is dropped only
once REPLY_STALL passes with no byte of its answer taken, never because an
answer that is going out took long."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gqa.adapters.local.wake import bound_socket

log = logging.getLogger("gqa.daemon")

MAX_CLIENTS = 64
MAX_PER_USER = 16              # connections one uid may hold open on a shared socket
MAX_REQUEST = 4 << 20          # bytes of one request line
REQUEST_TIMEOUT = 10.0         # seconds a client has, from its connection, to send its whole request
REPLY_STALL = 10.0             # seconds an answered client may go taking no byte of its answer
BUSY_RETRY = 0.05              # seconds the client waits before trying again when busy
CAP_NOTED_EVERY = 60.0         # seconds between log lines about one uid held at its cap


@dataclass(frozen=True)
class Peer:
    pid: int
    uid: int
    gid: int


# (peer, request) -> (status, body); may raise nothing: map errors to statuses itself
Handler = Callable[[Peer, dict], tuple[int, object]]


@dataclass
class _Connection:
    sock: socket.socket
    peer: Peer
    deadline: float            # reading: REQUEST_TIMEOUT after accept; answered: REPLY_STALL after the last byte sent
    inbox: bytearray = field(default_factory=bytearray)
    outbox: bytes = b""
    answered: bool = False


class RequestServer:
    def __init__(self, address: str | bytes, handler: Handler, *, mode: int = 0o600,
                 max_clients: int = MAX_CLIENTS, max_per_user: int | None = None):
        """`max_per_user`: the most connections one uid may hold (None: no cap but
        MAX_CLIENTS, for a socket only its owner may use)."""
        self.address, self.handler, self.max_clients = address, handler, max_clients
        self.max_per_user = max_per_user
        # a bind refused (a name another process holds, a directory at the path) is one line, not a traceback
        self.sock = bound_socket(socket.SOCK_STREAM, address)
        if isinstance(address, str):
            os.chmod(address, mode)
        self.sock.listen(256)
        self.sock.setblocking(False)
        self._open: dict[int, _Connection] = {}
        self._per_user: dict[int, int] = {}        # uid -> connections open
        self._cap_noted: dict[int, float] = {}     # uid -> when its cap was last logged
        self.selector: selectors.BaseSelector | None = None

    def attach(self, selector: selectors.BaseSelector) -> None:
        self.selector = selector
        selector.register(self.sock, selectors.EVENT_READ, self._accept)

    def _attached(self) -> selectors.BaseSelector:
        """The loop's selector; connections exist only once attach() gave it."""
        if self.selector is None:
            raise RuntimeError("the request server serves no one until attach() gives it the loop's selector")
        return self.selector

    # -- event callbacks (the loop calls key.data()) ---------------------------------------
    def _accept(self, _mask: int = 0) -> None:
        for _ in range(256):   # a bounded batch: exits and the next pass must not wait on a flood
            try:
                sock, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:   # EMFILE and the like: leave it in the backlog, try next turn
                log.warning("cannot accept a client: %s", exc)
                return
            sock.setblocking(False)
            try:
                pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            except OSError:
                sock.close()
                continue
            conn = _Connection(sock, Peer(pid, uid, gid), time.monotonic() + REQUEST_TIMEOUT)
            why = self._full_for(uid)
            if why is not None:
                self._reply(conn, 503, {"error": "busy", "retry_after": BUSY_RETRY, "why": why}, register=False)
                continue
            self._open[sock.fileno()] = conn
            self._per_user[uid] = self._per_user.get(uid, 0) + 1
            self._attached().register(sock, selectors.EVENT_READ, lambda mask, c=conn: self._ready(c, mask))

    def _full_for(self, uid: int) -> str | None:
        """Why one more connection of `uid` is told busy, or None."""
        idle = f"an idle one is dropped after {REQUEST_TIMEOUT:g} s"
        if len(self._open) >= self.max_clients:
            return f"all {self.max_clients} of its connections are in use ({idle})"
        held = self._per_user.get(uid, 0)
        if self.max_per_user is None or held < self.max_per_user:
            return None
        now = time.monotonic()
        if now - self._cap_noted.get(uid, -CAP_NOTED_EVERY) >= CAP_NOTED_EVERY:
            self._cap_noted[uid] = now
            log.warning("uid %d holds %d connections, the most one user may: its next ones are told busy",
                        uid, held)
        return f"this user (uid {uid}) has {held} connections open to it, the most one user may ({idle})"

    def _ready(self, conn: _Connection, mask: int) -> None:
        if conn.answered:
            self._flush(conn)
            return
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not chunk:
            self._close(conn)   # the client went away before asking
            return
        conn.inbox += chunk
        if len(conn.inbox) > MAX_REQUEST:
            self._reply(conn, 413, {"error": f"request over {MAX_REQUEST >> 20} MiB"})
            return
        if b"\n" not in conn.inbox:
            return
        line = bytes(conn.inbox[:conn.inbox.index(b"\n")])
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError:
            self._reply(conn, 400, {"error": "malformed request: not one JSON object"})
            return
        if _hung_up(conn.sock):
            log.info("dropped %s %s from pid %d (uid %d) unanswered: the client hung up before it was read",
                     request.get("method"), request.get("path"), conn.peer.pid, conn.peer.uid)
            self._close(conn)
            return
        try:
            status, body = self.handler(conn.peer, request)
        except Exception:   # a bug must not take the daemon down, nor show the client a traceback
            log.exception("answering %s %s failed", request.get("method"), request.get("path"))
            status, body = 500, {"error": "the queue daemon failed to answer (see its log)"}
        self._reply(conn, status, body)

    # -- replies -----------------------------------------------------------------------
    def _reply(self, conn: _Connection, status: int, body: object, *, register: bool = True) -> None:
        conn.answered = True
        conn.deadline = time.monotonic() + REPLY_STALL   # the time to read the request is over
        conn.outbox = json.dumps({"status": status, "body": body}, default=str).encode() + b"\n"
        if not register:   # never registered: one try, then drop it (a busy answer is small)
            with contextlib.suppress(OSError):
                conn.sock.send(conn.outbox)
            conn.sock.close()
            return
        self._attached().modify(conn.sock, selectors.EVENT_WRITE, lambda mask, c=conn: self._ready(c, mask))
        self._flush(conn)

    def _flush(self, conn: _Connection) -> None:
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.outbox = conn.outbox[sent:]
        if sent:
            conn.deadline = time.monotonic() + REPLY_STALL
        if not conn.outbox:
            self._close(conn)

    def expire(self) -> None:
        """Drop clients past their deadline (call once per loop turn): one that has not sent its
        request within REQUEST_TIMEOUT, or has taken no byte of its answer for REPLY_STALL."""
        now = time.monotonic()
        for conn in [c for c in self._open.values() if c.deadline < now]:
            self._close(conn)

    def next_deadline(self) -> float | None:
        """Seconds until the next client deadline, if any client is open."""
        if not self._open:
            return None
        return max(0.0, min(c.deadline for c in self._open.values()) - time.monotonic())

    def _close(self, conn: _Connection) -> None:
        if self._open.pop(conn.sock.fileno(), None) is not None:
            uid = conn.peer.uid
            self._per_user[uid] -= 1
            if not self._per_user[uid]:
                del self._per_user[uid]
            with contextlib.suppress(KeyError, ValueError):
                self._attached().unregister(conn.sock)
        conn.sock.close()

    def close(self) -> None:
        for conn in list(self._open.values()):
            self._close(conn)
        if self.selector is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(self.sock)
        self.sock.close()
        if isinstance(self.address, str):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)


def _hung_up(sock: socket.socket) -> bool:
    """Whether the client has closed its end: no one is left to read an answer. On a
    Unix socket POLLHUP means both directions are shut, so a client that only
    shut down its writing (half-close) is still answered."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return any(events & select.POLLHUP for _, events in poller.poll(0))
