"""Faults for a Deployment (fake_batch.py) and the Lambda service's answer to them.

- Lambda: invokes the handlers as the Lambda service does when one fails. An
  SQS batch's failed records (partial batch response) are delivered again,
  and all of them when the invocation raised; an asynchronous EventBridge
  invocation, or a wake-up message, is retried. A container that died is
  replaced by the next invocation (here: the same wiring, as a warm
  container's would be rebuilt the same way).
- Crash: kills the dispatcher's container just before or just after its
  n-th AWS call (ContainerDied, which nothing under test can catch).
- Throttle: refuses AWS calls for rate with the codes each service uses, on
  the first try of every call and/or at random with a seed, through a
  botocore before-call hook that returns the error response (botocore raises
  it as ClientError and skips its own retries, so only gqa's retries count).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gqa.models.spec import JobSpec

from tests.aws.fake_batch import ACCOUNT, CONTEXT, REGION, Deployment

SCHEDULE_EVENT = {"version": "0", "id": "tick", "detail-type": "Scheduled Event", "source": "aws.events",
                  "account": ACCOUNT, "time": "2024-01-01T00:00:00Z", "region": REGION,
                  "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/gqa-dispatch-tick"], "detail": {}}
TRIES = 25     # deliveries of one input before the test calls it lost (a queue's maxReceiveCount is about this)


class ContainerDied(BaseException):
    """Not an Exception: no `except Exception` under test can catch it, as no
    code can catch the kill of its container."""


class Lost(AssertionError):
    """An input failed on every delivery: it would have gone to a dead-letter queue."""


def clients_of(*wirings: Any) -> list[Any]:
    """The boto3 clients a handler's wiring holds (store, compute, checkpoints, intake), each once."""
    found: dict[int, Any] = {}
    todo = list(wirings)
    while todo:
        obj = todo.pop()
        for name in ("store", "compute", "checkpoints", "intake", "service", "supervisor"):
            if getattr(obj, name, None) is not None:
                todo.append(getattr(obj, name))
        client = getattr(obj, "client", None)
        if client is not None and hasattr(client, "meta"):
            found[id(client)] = client
    return list(found.values())


@dataclass
class Crash:
    """Kills the pass at its AWS call number `at` (0-based, counted while
    armed), just before the call or just after it returned, once."""

    at: int | None = None
    after: bool = False
    armed: bool = False
    calls: list[str] = field(default_factory=list)    # the operations called while armed, in order
    fired: str = ""

    def attach(self, client: Any) -> None:
        # after-call hooks registered earlier (FakeBatch's) see the answer before the crash
        client.meta.events.register("before-call", self._before)
        client.meta.events.register("after-call", self._after)

    def _before(self, model: Any, **_: Any) -> None:
        if not self.armed:
            return
        self.calls.append(f"{model.service_model.service_id.hyphenize()}.{model.name}")
        if self.at == len(self.calls) - 1 and not self.after:
            self._fire("before")

    def _after(self, model: Any, **_: Any) -> None:
        if self.armed and self.at == len(self.calls) - 1 and self.after:
            self._fire("after")

    def _fire(self, when: str) -> None:
        self.armed = False
        self.fired = f"{when} {self.calls[-1]}"
        raise ContainerDied(self.fired)


# "slow down" as each service spells it; every one is also refused as ThrottlingException
THROTTLE_CODES = {
    "dynamodb": ("ThrottlingException", "ProvisionedThroughputExceededException"),
    "sqs": ("ThrottlingException", "RequestThrottled"),
    "s3": ("ThrottlingException", "SlowDown"),
    "batch": ("ThrottlingException", "TooManyRequestsException"),
    "sns": ("ThrottlingException", "Throttling"),
}


class _Refusal:
    def __init__(self, status: int):
        self.status_code = status
        self.headers: dict[str, str] = {}


class Throttle:
    """Refuses calls made while `active`: with `first_try`, every call whose
    previous try of the same operation went through (so a call retried once
    succeeds); besides, each call with probability `chance`. Register it on
    the session before the handlers' cold starts: their clients copy it."""

    def __init__(self, session: Any, *, first_try: bool = False, chance: float = 0.0, seed: int = 0):
        self.first_try, self.chance = first_try, chance
        self.rng = random.Random(seed)
        self.active = False
        self.refused: Counter[tuple[str, str, str]] = Counter()
        self.passed: Counter[tuple[str, str]] = Counter()
        self._refused_last: dict[tuple[str, str], bool] = {}
        session.events.register("before-call", self._before)

    @contextmanager
    def on(self) -> Iterator[None]:
        self.active = True
        try:
            yield
        finally:
            self.active = False

    def _before(self, model: Any, **_: Any) -> tuple[_Refusal, dict[str, Any]] | None:
        if not self.active:
            return None
        service = model.service_model.service_id.hyphenize()
        key = (service, model.name)
        refuse = (self.first_try and not self._refused_last.get(key, False)) or self.rng.random() < self.chance
        self._refused_last[key] = refuse
        if not refuse:
            self.passed[key] += 1
            return None
        code = self.rng.choice(THROTTLE_CODES.get(service, ("ThrottlingException",)))
        self.refused[(service, model.name, code)] += 1
        status = 503 if code == "SlowDown" else 400
        return _Refusal(status), {"Error": {"Code": code, "Message": "Rate exceeded"},
                                  "ResponseMetadata": {"HTTPStatusCode": status}}


class Lambda:
    """The Lambda service in front of a Deployment's handlers: every input is
    delivered until it is handled (or TRIES run out: Lost). `faults` is
    entered around each invocation (a Throttle's on())."""

    def __init__(self, world: Deployment, *, faults: Callable[[], Any] | None = None):
        self.world = world
        self.faults = faults
        self.redelivered: Counter[str] = Counter()     # per function: deliveries after the first
        self.died = 0

    def _invoke(self, function: str, call: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            if self.faults is None:
                return True, call()
            with self.faults():
                return True, call()
        except ContainerDied:
            self.died += 1
            return False, None
        except Exception as exc:   # the function failed: Lambda retries it, SQS redelivers
            return False, exc

    def send(self, job_spec: JobSpec) -> None:
        """The API's send: a refused one is sent again (as the CLI would on its error)."""
        self._until("api", lambda: self.world.send(job_spec))

    def admit(self, records: list[dict[str, Any]]) -> None:
        """Records are delivered until each is consumed."""
        for delivery in range(TRIES):
            if not records:
                return
            if delivery:
                self.redelivered["admit"] += 1
            ok, out = self._invoke("admit", partial(self.world.admit.handler, {"Records": records}, CONTEXT))
            failed = {f["itemIdentifier"] for f in out["batchItemFailures"]} if ok else \
                {r["messageId"] for r in records}
            records = [r for r in records if r["messageId"] in failed]
        raise Lost(f"{len(records)} submissions never admitted")

    def dispatch(self, event: dict[str, Any]) -> dict[str, Any]:
        return self._until("dispatch", lambda: self.world.dispatch.handler(event, CONTEXT))

    def reconcile(self, event: dict[str, Any]) -> dict[str, Any]:
        return self._until("reconcile", lambda: self.world.reconcile.handler(event, CONTEXT))

    def _until(self, function: str, call: Callable[[], Any]) -> Any:
        last = None
        for delivery in range(TRIES):
            if delivery:
                self.redelivered[function] += 1
            ok, out = self._invoke(function, call)
            if ok:
                return out
            last = out
        raise Lost(f"{function} failed on every delivery: {last!r}")
