"""AWS errors -> domain errors, and the retry of transient ones.

DynamoDB first (the store's codes and transaction cancellation reasons), then
the other services the adapters call (SQS, S3, SNS, Batch), each of which
spells "slow down" and "no such thing" its own way. Decisions are made on
error codes only, never on message text (messages change between SDK and
service versions)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, ParamValidationError
from botocore.exceptions import ConnectionError as ConnectionFailed

from ...models.errors import BackendUnavailable, Conflict, GqaError, Misconfigured, NotFound

# the request was refused for rate, not for content: the same request may succeed later
THROTTLING = frozenset({"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"})
# TransactionConflictException: a plain Put/Update/Delete met an item inside another's transaction
TRANSIENT = THROTTLING | {"InternalServerError", "ServiceUnavailable", "TransactionInProgressException",
                          "TransactionConflictException"}
# per-item reasons in a TransactionCanceledException that mean "try again", not "you lost"
TRANSIENT_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict"})
CONDITION_FAILED = "ConditionalCheckFailed"


def code_of(error: ClientError) -> str:
    return error.response.get("Error", {}).get("Code", "")


def cancellation_reasons(error: ClientError) -> list[str]:
    """The per-item codes of a cancelled transaction, in request order ("None" for items that were fine)."""
    return [r.get("Code", "None") for r in error.response.get("CancellationReasons", [])]


def is_transient(error: ClientError) -> bool:
    code = code_of(error)
    if code == "TransactionCanceledException":
        reasons = cancellation_reasons(error)
        # a failed condition is an answer, not a hiccup: retrying would fail the same way
        return CONDITION_FAILED not in reasons and any(r in TRANSIENT_REASONS for r in reasons)
    return code in TRANSIENT


class ConditionFailed(Conflict):
    """A single-item write whose condition failed. `item`: the item as stored
    (DynamoDB's JSON), where the request asked for it (ALL_OLD) and it exists;
    guarded.py tells by it a retry that met its own earlier try."""

    def __init__(self, message: str, item: dict[str, Any] | None = None):
        super().__init__(message)
        self.item = item


class TransactionConflict(Conflict):
    """A transaction cancelled because some items' conditions failed. `reasons`
    are DynamoDB's CancellationReasons, one per item in request order (with the
    item as stored where the request asked for ALL_OLD), so a caller can tell
    which items lost. Services see a plain Conflict."""

    def __init__(self, message: str, reasons: list[dict[str, Any]]):
        super().__init__(message)
        self.reasons = reasons

    @property
    def failed(self) -> list[int]:
        """The positions of the items whose condition failed."""
        return [i for i, r in enumerate(self.reasons) if r.get("Code") == CONDITION_FAILED]


def translate(error: ClientError, operation: str) -> GqaError:
    """The domain error for a non-transient (or no longer retried) SDK error."""
    code = code_of(error)
    if code == "ConditionalCheckFailedException":
        return ConditionFailed(f"{operation}: a record changed under us", error.response.get("Item"))
    if code == "TransactionCanceledException" and CONDITION_FAILED in cancellation_reasons(error):
        return TransactionConflict(f"{operation}: a record changed under us",
                                   list(error.response.get("CancellationReasons", [])))
    if is_transient(error):
        return BackendUnavailable(f"DynamoDB is throttling or unavailable ({code} on {operation}); try again later")
    if code == "ResourceNotFoundException":
        return BackendUnavailable(f"{operation}: a gqa table does not exist (is the stack deployed?)")
    if code in DENIED:
        return Misconfigured(f"{operation}: the credentials cannot use the gqa tables ({code})")
    return BackendUnavailable(f"{operation} failed: {code}")


Translate = Callable[[ClientError, str], GqaError]


class Retrying:
    """Calls an AWS client, retrying transient errors with capped exponential
    backoff and full jitter, then translating what is left.

    The backoff spreads out retries from many Lambda invocations hitting the
    same hot partition; full jitter (sleep uniform in [0, cap]) avoids them
    retrying in lockstep. The defaults judge DynamoDB's codes; `for_service`
    builds one for another service. `unanswered`: also retry a call that got no
    answer (a connection refused, reset or timed out), as botocore would; only
    for calls safe to repeat, made through a client botocore does not retry."""

    def __init__(self, client: Any, *, attempts: int = 5, base_delay: float = 0.05, max_delay: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep, rng: Callable[[], float] = random.random,
                 service: str = "DynamoDB", transient: Callable[[ClientError], bool] = is_transient,
                 translate: Translate = translate, unanswered: bool = False):
        self.client = client
        self.attempts = max(1, attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep
        self.rng = rng
        self.service = service
        self.transient = transient
        self.translate = translate
        self.unanswered = unanswered

    @classmethod
    def for_service(cls, client: Any, service: str, codes: Mapping[str, type[GqaError]] | None = None, *,
                    transient: Callable[[ClientError], bool] | None = None, **kwargs: Any) -> "Retrying":
        """Retries for SQS, S3, SNS or Batch; `codes` maps the codes that mean
        something particular to the caller's operations (e.g. Batch's
        ClientException on SubmitJob -> LaunchFailed) before the common ones;
        `transient` narrows what is retried (default: throttling and server errors)."""
        return cls(client, service=service, transient=transient or is_service_transient,
                   translate=service_translator(service, codes or {}), **kwargs)

    def delay(self, retry: int) -> float:
        """Sleep before retry number `retry` (0-based)."""
        return self.rng() * min(self.max_delay, self.base_delay * 2 ** retry)

    def __call__(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        method = getattr(self.client, _snake(operation))
        for attempt in range(self.attempts):
            try:
                return method(**kwargs)
            except ClientError as exc:
                if not self.transient(exc):
                    raise self.translate(exc, operation) from exc
                if attempt + 1 == self.attempts:
                    raise BackendUnavailable(
                        f"{self.service} kept refusing {operation} ({code_of(exc)}) after {self.attempts} tries; "
                        "try again later") from exc
                self.sleep(self.delay(attempt))
            except ParamValidationError:
                raise   # a malformed request is a bug here, not an outage
            except (ConnectionFailed, HTTPClientError) as exc:   # no answer: a connection refused, reset, timed out
                if not self.unanswered or attempt + 1 == self.attempts:
                    raise BackendUnavailable(f"cannot reach {self.service} for {operation}: "
                                             f"{type(exc).__name__}") from exc
                self.sleep(self.delay(attempt))
            except BotoCoreError as exc:   # no endpoint, no credentials
                raise BackendUnavailable(f"cannot reach {self.service} for {operation}: {type(exc).__name__}") from exc
        raise AssertionError("unreachable")


# -- SQS, S3, SNS, Batch ------------------------------------------------------------------------------
# "slow down", in each service's words (S3: SlowDown; SQS: RequestThrottled; SNS: Throttling;
# Batch: TooManyRequestsException), plus DynamoDB's
SERVICE_THROTTLING = THROTTLING | frozenset({
    "Throttling", "ThrottledException", "TooManyRequestsException", "RequestThrottled",
    "RequestThrottledException", "SlowDown", "KMSThrottlingException", "KMS.ThrottlingException"})
# the service failed, not the request: the same request may succeed later
SERVICE_TRANSIENT = SERVICE_THROTTLING | frozenset({
    "InternalError", "InternalFailure", "InternalServerError", "ServiceUnavailable", "ServerException",
    "RequestTimeout", "500", "503"})
# no such queue / bucket / key / topic (S3's HEAD answers carry only the status code)
MISSING = frozenset({
    "NotFound", "404", "NoSuchBucket", "NoSuchKey", "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
    "ResourceNotFoundException"})
# a conditional write lost (S3's If-Match / If-None-Match)
PRECONDITION = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})
DENIED = frozenset({
    "AccessDenied", "AccessDeniedException", "AuthorizationError", "UnrecognizedClientException",
    "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch"})


def is_service_transient(error: ClientError) -> bool:
    return code_of(error) in SERVICE_TRANSIENT


def is_service_throttling(error: ClientError) -> bool:
    """Refused for rate, so surely not carried out: safe to retry even a call that is not idempotent."""
    return code_of(error) in SERVICE_THROTTLING


def service_translator(service: str, codes: Mapping[str, type[GqaError]]) -> Translate:
    """translate() for a service other than DynamoDB: the caller's own codes
    first, then missing -> NotFound, lost precondition -> Conflict, the rest
    BackendUnavailable."""
    def translate_error(error: ClientError, operation: str) -> GqaError:
        code = code_of(error)
        if code in codes:
            return codes[code](f"{service} refused {operation} ({code})")
        if code in MISSING:
            return NotFound(f"{operation}: the {service} resource does not exist ({code}; is the stack deployed?)")
        if code in PRECONDITION:
            return Conflict(f"{operation}: the {service} object changed under us ({code})")
        if code in SERVICE_TRANSIENT:
            return BackendUnavailable(f"{service} is throttling or unavailable ({code} on {operation}); "
                                      "try again later")
        if code in DENIED:
            return Misconfigured(f"{operation}: the credentials cannot use {service} ({code})")
        return BackendUnavailable(f"{operation} failed: {service} answered {code}")
    return translate_error


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")
