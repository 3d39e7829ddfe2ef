"""The CLI's backend for a shared box's queue (`gqa local start --system`):
every command goes through the daemon's socket, since users cannot (and must
not) read its database. The daemon speaks the AWS API's routes and JSON
(daemon/routes.py), so the same proxies as AwsBackend's serve here over
SocketApi.

Protocol: one request per connection on GQA_HOME/cli.sock. The client sends
one JSON line {"v": 1, "method", "path", "query", "body"} and reads one JSON
line {"status", "body"}. A daemon at capacity answers 503 {"error": "busy",
"retry_after": seconds} before reading anything, so every request is retried
then, with jittered backoff, for at most BUSY_WAIT seconds. A daemon that
takes the request and says nothing (stopped, hung) is named on stderr after
SLOW_AFTER seconds (cli/daemon_socket.py); a read (GET) gives up after
READ_TIMEOUT with its pid and how to look at it, while a change waits
ANSWER_TIMEOUT, since the daemon may be carrying it out."""

from __future__ import annotations

import json
import random
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from gqa.models.errors import BackendUnavailable
from gqa.services.api_errors import error_from_answer

from .aws_backend import ApiServices, Submitter
from .daemon_socket import REPLY_TIMEOUT, Wait, address, if_stopped, talk

CONNECT_TIMEOUT = 5.0     # seconds: a live daemon accepts at once (its backlog is deep)
ANSWER_TIMEOUT = REPLY_TIMEOUT   # seconds a change waits: a big array's submission is one transaction
READ_TIMEOUT = 30.0       # seconds a read (GET) waits: it changes nothing, so giving up is safe
BUSY_WAIT = 60.0          # seconds of "busy" answers before giving up
MAX_ANSWER = 256 << 20    # bytes: a queue page is about 1 MB


class SocketApi:
    """.call(method, path, query=, body=) -> the answer's JSON object, or the
    domain error it stands for; as ApiClient does over HTTPS."""

    def __init__(self, home: Path | str, *, timeout: float = ANSWER_TIMEOUT, read_timeout: float | None = None,
                 busy_wait: float = BUSY_WAIT,
                 base_delay: float = 0.05, max_delay: float = 2.0, sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random, stderr: TextIO | None = None):
        self.home = str(home)
        self.address = address(self.home)
        self.timeout, self.busy_wait = timeout, busy_wait
        self.read_timeout = READ_TIMEOUT if read_timeout is None else read_timeout
        self.base_delay, self.max_delay = base_delay, max_delay
        self.sleep, self.rng = sleep, rng
        self.stderr = stderr
        self._told_busy = self._told_slow = False

    def call(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
             body: Any = None) -> dict[str, Any]:
        request = {"v": 1, "method": method.upper(), "path": path, "query": _query(query), "body": body}
        line = json.dumps(request).encode() + b"\n"
        waited, retry = 0.0, 0
        while True:
            status, answer = self._exchange(line, method.upper())
            if not _busy(status, answer):
                break
            if waited >= self.busy_wait:
                raise BackendUnavailable(f"the queue daemon at {self.home} stayed busy for {waited:.0f}s; "
                                         "try again in a moment")
            if not self._told_busy:
                (self.stderr or sys.stderr).write("gqa: the queue daemon is busy; retrying\n")
                self._told_busy = True
            delay = _seconds(answer.get("retry_after")) + self.rng() * min(self.max_delay,
                                                                           self.base_delay * 2 ** retry)
            self.sleep(delay)
            waited += delay
            retry += 1
        if 200 <= status < 300:
            if not isinstance(answer, dict):
                raise self._malformed(f"status {status} with a body that is not a JSON object")
            return answer
        raise error_from_answer(status, answer, fallback=f"the queue daemon answered {status}")

    def _exchange(self, line: bytes, method: str) -> tuple[int, Any]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with sock:
            sock.settimeout(CONNECT_TIMEOUT)
            try:
                sock.connect(self.address)
            except (FileNotFoundError, ConnectionRefusedError):
                raise BackendUnavailable(f"the shared queue daemon at {self.home} is not running; "
                                         "ask an admin of this machine to start it") from None
            except PermissionError:
                raise BackendUnavailable(f"cannot connect to the queue daemon at {self.home}: its socket refuses "
                                         "this user (permission denied)") from None
            except OSError as exc:
                raise BackendUnavailable(f"cannot reach the queue daemon at {self.home}: "
                                         f"{exc.strerror or exc}") from None
            # from here on the daemon may act on the request: a broken exchange is never retried
            wait = Wait(sock, self._limit(method), self._say_waiting(method))
            try:
                data = talk(sock, line, wait, most=MAX_ANSWER)
            except (OSError, ValueError) as exc:
                raise self._lost(method, exc) from None
            if data is None:
                raise self._silent(method, wait)
        data = data.split(b"\n", 1)[0]
        if not data:
            raise self._lost(method, None)
        try:
            reply = json.loads(data)
        except ValueError:
            raise self._malformed("something that is not JSON") from None
        if not isinstance(reply, dict) or type(reply.get("status")) is not int:
            raise self._malformed("JSON without a status")
        return reply["status"], reply.get("body")

    def _limit(self, method: str) -> float:
        """A read gives up sooner than a change, which the daemon may be carrying out."""
        return min(self.timeout, self.read_timeout) if method == "GET" else self.timeout

    def _say_waiting(self, method: str) -> Callable[[int | None, float], None]:
        def say(pid: int | None, seconds: float) -> None:
            if self._told_slow:
                return
            self._told_slow = True
            why = "" if method == "GET" else " (it may be carrying out the request)"
            out = self.stderr or sys.stderr   # never stdout: `-o json` stays clean
            out.write(f"gqa: waiting for {self._daemon(pid)}, which has not answered for {seconds:.0f} s"
                      f"{if_stopped(pid)}; waiting up to {self._limit(method):g} s{why}\n")
            out.flush()
        return say

    def _silent(self, method: str, wait: Wait) -> BackendUnavailable:
        """No answer within the limit: where the daemon is, what it is, and how to look at it."""
        said = f"{self._daemon(wait.pid)} did not answer within {wait.timeout:g} s"
        stopped_now = if_stopped(wait.pid)
        look = (stopped_now or (f"; it may be busy or hung: `ps -o pid,stat,etime -p {wait.pid}` shows it "
                                "(stat T: stopped), and an admin of this machine can read its log"
                                if wait.pid else "; it may be busy or hung: ask an admin of this machine"))
        if method != "GET":
            look += "; it may have carried out the request: check `gqa queue` before trying again"
        return BackendUnavailable(said + look)

    def _daemon(self, pid: int | None) -> str:
        return f"the queue daemon at {self.home}" + (f" (pid {pid})" if pid else "")

    def _lost(self, method: str, exc: Exception | None) -> BackendUnavailable:
        why = f" ({exc})" if exc else ""
        check = "; check `gqa queue` before trying again" if method in ("POST", "PUT", "DELETE") else ""
        return BackendUnavailable(f"lost contact with the queue daemon at {self.home}{why}{check}")

    def _malformed(self, what: str) -> BackendUnavailable:
        return BackendUnavailable(f"the queue daemon at {self.home} answered with {what}; "
                                  "is the CLI as new as the daemon?")


def _busy(status: int, answer: Any) -> bool:
    return status == 503 and isinstance(answer, dict) and answer.get("error") == "busy"


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return min(max(0.0, float(value)), 5.0)


def _query(query: Mapping[str, Any] | None) -> dict[str, str] | None:
    """As a URL's query would carry them (ApiClient.url): strings, without the unset."""
    if not query:
        return None
    wanted = {k: ("true" if v else "false") if isinstance(v, bool) else str(v)
              for k, v in query.items() if v is not None}
    return wanted or None


@dataclass
class DaemonBackend(ApiServices):
    """What LocalBackend hands out, through a shared daemon at `home`."""

    home: Path
    local = False                  # the daemon answers; nothing here reads the queue's files
    poll_interval = 0.5            # seconds between reads while waiting (each a round trip)

    @cached_property
    def api(self) -> SocketApi:
        return SocketApi(self.home)

    def submitter(self) -> Submitter:
        # jobs start from the submitting shell's environment, as single-user ones do
        return Submitter(self.api, send_environment=True)

    def triggers(self):
        from .local_backend import triggers_unavailable

        raise triggers_unavailable()

    def whoami(self) -> dict[str, Any]:
        return self.api.call("GET", "/whoami")

    def troubles(self) -> list[dict[str, Any]]:
        """What the daemon says is failing now (GET /daemon)."""
        from .daemon_socket import told_troubles

        return told_troubles(self.api.call("GET", "/daemon"))

    def daemon_pid(self) -> int | None:
        return None
