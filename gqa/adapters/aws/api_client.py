"""The gqa API as the CLI calls it: HTTPS requests signed with SigV4 for
execute-api, with credentials from the standard AWS chain (environment,
shared config and credentials files, SSO, instance or container roles), and
answers turned back into domain errors by the error's class name.

Retries: a throttled request (429) was refused before anything ran, so every
method is retried after it, with capped exponential backoff and full jitter.
A server error (5xx) or a broken connection may come after the work was done:
only GET and PUT (which set, not add) are retried after those; a POST answers
BackendUnavailable at once, and the caller checks `gqa queue` before trying
again, as after a lost daemon connection locally.

The transport is injectable: `transport(method, url, headers, body) ->
(status, body_bytes)`, raising OSError when the network fails. The default
sends with urllib (certificate checks on)."""

from __future__ import annotations

import json
import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from ...models import errors
from ...models.errors import BackendUnavailable, GqaError, NotAuthenticated, NotPermitted, SpecError

Transport = Callable[[str, str, Mapping[str, str], bytes | None], tuple[int, bytes]]
SERVICE = "execute-api"
IDEMPOTENT = frozenset({"GET", "PUT", "HEAD", "DELETE"})
_REGION_IN_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
TIMEOUT = 30.0


def urllib_transport(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
                     timeout: float = TIMEOUT) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:     # an answer, just not a 2xx one
        with exc:
            return exc.code, exc.read()


def region_of(endpoint: str) -> str | None:
    """The region in an execute-api URL (https://ID.execute-api.REGION.amazonaws.com/STAGE)."""
    match = _REGION_IN_HOST.search(urlsplit(endpoint).hostname or "")
    return match.group(1) if match else None


class ApiClient:
    def __init__(self, endpoint: str, region: str | None = None, session: Any = None,
                 transport: Transport | None = None, *, profile: str | None = None, attempts: int = 4,
                 base_delay: float = 0.25, max_delay: float = 4.0, sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random):
        parts = urlsplit(endpoint)
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise SpecError(f"the API endpoint {endpoint!r} is not a URL; e.g. "
                            "https://abc123.execute-api.us-east-1.amazonaws.com/v1")
        self.endpoint = endpoint.rstrip("/")
        self.profile = profile
        self._session = session
        self._region = region
        self.transport = transport or urllib_transport
        self.attempts = max(1, attempts)
        self.base_delay, self.max_delay = base_delay, max_delay
        self.sleep, self.rng = sleep, rng

    # -- credentials and region, from the standard chain ------------------------------------------------
    @property
    def session(self) -> Any:
        if self._session is None:
            import boto3
            from botocore.exceptions import ProfileNotFound

            try:
                self._session = boto3.session.Session(profile_name=self.profile)
            except ProfileNotFound:
                raise SpecError(f"no AWS profile named {self.profile!r} in your AWS config "
                                "(set another with `gqa config set aws_profile NAME`)") from None
        return self._session

    @property
    def region(self) -> str:
        region = self._region or region_of(self.endpoint) or self.session.region_name
        if not region:
            raise SpecError("no AWS region for the gqa API: `gqa config set region REGION` (or AWS_REGION)")
        return region

    def _credentials(self) -> Any:
        from botocore.exceptions import BotoCoreError

        try:
            credentials = self.session.get_credentials()
            frozen = credentials.get_frozen_credentials() if credentials is not None else None
        except BotoCoreError as exc:   # an SSO token expired, a credential process failed
            raise NotAuthenticated(f"cannot load AWS credentials: {exc}") from None
        if frozen is None or not frozen.access_key:
            where = f"profile {self.profile}" if self.profile else "the environment, ~/.aws or an instance role"
            raise NotAuthenticated(f"no AWS credentials found (looked in {where}); sign in with "
                                   "`aws configure` or `aws sso login`, or choose a profile with "
                                   "`gqa config set aws_profile NAME`")
        return frozen

    # -- one call ---------------------------------------------------------------------------------------
    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        wanted = {k: _text(v) for k, v in (query or {}).items() if v is not None}
        return self.endpoint + path + (f"?{urlencode(sorted(wanted.items()))}" if wanted else "")

    def signed(self, method: str, url: str, data: bytes | None) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=data or b"",
                             headers={"Accept": "application/json", "Content-Type": "application/json",
                                      "User-Agent": "gqa-cli"})
        SigV4Auth(self._credentials(), SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())

    def call(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
             body: Any = None) -> dict[str, Any]:
        method = method.upper()
        url = self.url(path, query)
        data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "PUT") else None)
        for attempt in range(self.attempts):
            last = attempt + 1 == self.attempts
            headers = self.signed(method, url, data)    # signed afresh: the signature holds the time
            try:
                status, answer = self.transport(method, url, headers, data)
            except OSError as exc:
                if method in IDEMPOTENT and not last:
                    self.sleep(self._delay(attempt))
                    continue
                raise BackendUnavailable(f"cannot reach the gqa API at {self.endpoint}: {_reason(exc)}") from exc
            if 200 <= status < 300:
                return _json(answer, status)
            retry = status == 429 or (status >= 500 and method in IDEMPOTENT)
            if retry and not last:
                self.sleep(self._delay(attempt))
                continue
            raise self._error(status, answer, tries=attempt + 1)
        raise AssertionError("unreachable")

    def _delay(self, retry: int) -> float:
        return self.rng() * min(self.max_delay, self.base_delay * 2 ** retry)

    def _error(self, status: int, answer: bytes, *, tries: int) -> GqaError:
        try:
            data = json.loads(answer) if answer else {}
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        message = str(data.get("message") or data.get("Message") or answer[:200].decode(errors="replace")).strip()
        kind = getattr(errors, str(data.get("error")), None)
        if isinstance(kind, type) and issubclass(kind, GqaError):
            return kind(message)                        # the API's own answer, by class name
        # API Gateway's answers (its own throttling, authorisation, integration errors) carry no class
        if status == 429:
            return BackendUnavailable(f"the gqa API is throttling requests (429) after {tries} tries; "
                                      "try again later")
        if status in (401, 403):
            who = f"profile {self.profile}" if self.profile else "your default credentials"
            return NotPermitted(f"the gqa API refused the request ({status}: {message}); check that {who} "
                                "are valid and that an IAM policy lets them call execute-api:Invoke on the API, "
                                "and that the endpoint and region are right (`gqa config show`)")
        return BackendUnavailable(f"the gqa API answered {status}: {message or 'no details'}")


def job_path(refs: list[str] | str, action: str | None = None) -> str:
    """/jobs/REF[,REF...][/action], each ref quoted for the path."""
    refs = [refs] if isinstance(refs, str) else refs
    path = "/jobs/" + ",".join(quote(r, safe="") for r in refs)
    return f"{path}/{action}" if action else path


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _json(answer: bytes, status: int) -> dict[str, Any]:
    try:
        data = json.loads(answer) if answer else {}
    except ValueError:
        raise BackendUnavailable(f"the gqa API answered {status} with something that is not JSON") from None
    if not isinstance(data, dict):
        raise BackendUnavailable(f"the gqa API answered {status} with JSON that is not an object")
    return data


def _reason(exc: OSError) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or exc) or type(exc).__name__
