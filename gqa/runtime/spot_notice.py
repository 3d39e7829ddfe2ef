"""The spot interruption notice, read from inside a Batch job.

EC2 posts a spot instance's interruption in its instance metadata two
minutes ahead: spot/instance-action answers 404 until then, and then
{"action": "terminate", "time": "2026-03-02T10:16:07Z"}; AWS recommends
reading it every 5 seconds. Nothing else tells a Batch job: ECS's spot
draining replaces the tasks of services, and leaves standalone tasks, which
Batch jobs are, running until the instance is gone. So the job's runtime
(job_process.py) reads it itself, with IMDSv2: a session token from
PUT /latest/api/token, sent with every read.

It watches only in a Batch job (AWS_BATCH_JOB_ID), only on a spot instance
(meta-data/instance-life-cycle), at the endpoint the AWS SDKs use
(AWS_EC2_METADATA_SERVICE_ENDPOINT, or AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE
IPv6), never with AWS_EC2_METADATA_DISABLED=true, and not at all where the
service does not answer the first contact (metadata turned off, a container
beyond the instance's hop limit): one line on stderr then says so. While no
notice comes it costs one local request every 5 seconds and prints nothing.

Standard library only, like the rest of gqa.runtime."""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlsplit

ENDPOINT_ENV = "AWS_EC2_METADATA_SERVICE_ENDPOINT"
MODE_ENV = "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"
DISABLED_ENV = "AWS_EC2_METADATA_DISABLED"
BATCH_ENV = "AWS_BATCH_JOB_ID"            # Batch sets it in every job's container
ENDPOINTS = {"ipv4": "http://169.254.169.254", "ipv6": "http://[fd00:ec2::254]"}
TOKEN_PATH = "/latest/api/token"
ACTION_PATH = "/latest/meta-data/spot/instance-action"
LIFECYCLE_PATH = "/latest/meta-data/instance-life-cycle"
TOKEN_TTL = 21600            # seconds, IMDSv2's longest; renewed RENEW_BEFORE ahead of its end
RENEW_BEFORE = 300
INTERVAL = 5.0               # between reads, as AWS recommends
TIMEOUT = 1.0                # per request: the service is on the instance itself (the SDKs' default too)
FIRST_TRIES = 3              # a service that has not answered this many tries is taken to be absent
NOTICE_SECONDS = 120.0       # the notice's lead, when its time cannot be read


class Unreachable(Exception):
    """The metadata service did not answer."""


class Refused(Unreachable):
    """The metadata service answered, but not with what was asked (turned off, no token)."""


@dataclass(frozen=True)
class Notice:
    action: str                 # terminate, stop or hibernate
    time: float | None          # epoch seconds the interruption is due; None when unreadable
    text: str                   # as posted

    def describe(self) -> str:
        when = "" if self.time is None else \
            " at " + datetime.fromtimestamp(self.time, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"the spot instance is to {self.action or 'be interrupted'}{when}"


def parse_notice(text: str) -> Notice:
    """spot/instance-action's body; any body there is a notice, readable or not."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return Notice("", None, text)
    action, when = str(body.get("action") or ""), body.get("time")
    try:
        at = datetime.strptime(str(when), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        at = None
    return Notice(action, at, text)


def endpoint_of(env: Mapping[str, str]) -> str | None:
    """Where the metadata service is for this job, or None where none is to be read."""
    if env.get(DISABLED_ENV, "").strip().lower() == "true" or not env.get(BATCH_ENV, "").strip():
        return None
    given = env.get(ENDPOINT_ENV, "").strip()
    return (given or ENDPOINTS.get(env.get(MODE_ENV, "").strip().lower(), ENDPOINTS["ipv4"])).rstrip("/")


class Metadata:
    """IMDSv2 reads: a session token kept until shortly before it lapses."""

    def __init__(self, endpoint: str, *, timeout: float = TIMEOUT, clock: Callable[[], float] = time.time):
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{ENDPOINT_ENV}={endpoint!r} is not an http:// address")
        self.endpoint = endpoint
        self._connection = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        # the port given always: http.client would read an IPv6 address's last group as one
        self._host, self._port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        self.timeout = timeout
        self.clock = clock
        self._token: tuple[str, float] | None = None     # (token, when it was issued)

    def _request(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, str]:
        connection = self._connection(self._host, self._port, timeout=self.timeout)
        try:
            connection.request(method, path, headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read(64 * 1024).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None
        finally:
            connection.close()

    def token(self, *, renew: bool = False) -> str:
        now = self.clock()
        if self._token is None or renew or now - self._token[1] >= TOKEN_TTL - RENEW_BEFORE:
            status, body = self._request("PUT", TOKEN_PATH, {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL)})
            if status != 200 or not body.strip():
                raise Refused(f"a session token was refused: HTTP {status}")
            self._token = (body.strip(), now)
        return self._token[0]

    def read(self, path: str) -> str | None:
        """The item at `path`, or None where there is none (404)."""
        for renew in (False, True):
            status, body = self._request("GET", path, {"X-aws-ec2-metadata-token": self.token(renew=renew)})
            if status == 200:
                return body
            if status == 404:
                return None
            if status != 401:       # 401: the token lapsed or the service restarted; a new one, once
                break
        raise Refused(f"GET {path}: HTTP {status}")


class SpotWatch:
    """Reads the notice every `interval` seconds until it comes or stop() is called. `wait(s)`
    waits s seconds and says whether to stop: an Event's wait, or a test's own."""

    def __init__(self, metadata: Metadata, *, interval: float = INTERVAL,
                 wait: Callable[[float], bool] | None = None,
                 log: Callable[[str], object] | None = None):
        self.metadata = metadata
        self.interval = interval
        self._stopped = threading.Event()
        self._wait = wait or self._stopped.wait
        self._log = log or _stderr
        self.notice: Notice | None = None

    def stop(self) -> None:
        self._stopped.set()

    def run(self, on_notice: Callable[[Notice], object]) -> Notice | None:
        """Watch; on a notice call `on_notice` with it and return it. None when it stopped,
        the instance is not spot, or the service is not there."""
        if not self._first_contact():
            return None
        while not self._stopped.is_set():
            try:
                text = self.metadata.read(ACTION_PATH)
            except Unreachable:
                text = None         # a read that failed once the service answered: the next may not
            if text is not None:
                self.notice = parse_notice(text)
                on_notice(self.notice)
                return self.notice
            if self._wait(self.interval):
                break
        return None

    def _first_contact(self) -> bool:
        """Whether to watch: the service answers and the instance is spot."""
        for tries in range(1, FIRST_TRIES + 1):
            try:
                lifecycle = self.metadata.read(LIFECYCLE_PATH)
            except Unreachable as exc:
                if isinstance(exc, Refused) or tries == FIRST_TRIES:
                    self._log(f"gqa: the instance metadata service at {self.metadata.endpoint} cannot be read "
                              f"({exc}): a spot interruption notice will not reach this job\n")
                    return False
                if self._wait(self.interval):
                    return False
                continue
            # on demand (or a life cycle not given): no notice will come, so nothing to read
            return lifecycle is None or lifecycle.strip() == "spot"
        return False


def spot_watch(env: Mapping[str, str]) -> SpotWatch | None:
    """The watch for a job in `env`, or None where there is nothing to watch."""
    endpoint = endpoint_of(env)
    if endpoint is None:
        return None
    try:
        return SpotWatch(Metadata(endpoint))
    except ValueError as exc:
        _stderr(f"gqa: {exc}: a spot interruption notice will not reach this job\n")
        return None


def hold_for_reclaim(notice: Notice, code: int, *, clock: Callable[[], float] = time.time,
                     sleep: Callable[[float], object] = time.sleep, past: float = 300.0,
                     log: Callable[[str], object] | None = None) -> None:
    """Stay until the instance is taken, at most `past` seconds beyond the notice's time.

    A container that ends first ends its Batch job as its own failure (exit code 143 and
    "Essential container in task exited"), which gqa counts against the job's retries; one
    still there when the instance goes ends it as Batch's "Host EC2 (instance ...) terminated",
    which gqa reads as a reclaim (gqa/models/batch_events.py) and resumes without a retry spent."""
    say = log or _stderr
    until = (notice.time if notice.time is not None else clock() + NOTICE_SECONDS) + past
    say(f"gqa: the job's command ended with exit code {code} after the spot interruption notice; "
        "waiting for the instance to go, so the attempt ends as reclaimed\n")
    while (left := until - clock()) > 0:
        sleep(min(left, 30.0))
    say(f"gqa: the instance was still here {past:.0f} s past the notice's time; the job ends with exit code "
        f"{code}\n")


def _stderr(line: str) -> None:
    sys.stderr.write(line)
    sys.stderr.flush()
