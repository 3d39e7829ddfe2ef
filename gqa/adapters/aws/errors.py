"""DynamoDB errors -> domain errors, and the retry of transient ones.

Decisions are made on error codes and transaction cancellation reasons only,
never on message text (messages change between SDK and service versions)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from ...models.errors import BackendUnavailable, Conflict, GqaError

# the request was refused for rate, not for content: the same request may succeed later
THROTTLING = frozenset({"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"})
TRANSIENT = THROTTLING | {"InternalServerError", "ServiceUnavailable", "TransactionInProgressException"}
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


def translate(error: ClientError, operation: str) -> GqaError:
    """The domain error for a non-transient (or no longer retried) SDK error."""
    code = code_of(error)
    if code == "ConditionalCheckFailedException" or (
            code == "TransactionCanceledException" and CONDITION_FAILED in cancellation_reasons(error)):
        return Conflict(f"{operation}: a record changed under us")
    if is_transient(error):
        return BackendUnavailable(f"DynamoDB is throttling or unavailable ({code} on {operation}); try again later")
    if code == "ResourceNotFoundException":
        return BackendUnavailable(f"{operation}: a gqa table does not exist (is the stack deployed?)")
    if code in ("AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"):
        return BackendUnavailable(f"{operation}: the credentials cannot use the gqa tables ({code})")
    return BackendUnavailable(f"{operation} failed: {code}")


class Retrying:
    """Calls the DynamoDB client, retrying transient errors with capped
    exponential backoff and full jitter, then translating what is left.

    The backoff spreads out retries from many Lambda invocations hitting the
    same hot partition; full jitter (sleep uniform in [0, cap]) avoids them
    retrying in lockstep."""

    def __init__(self, client: Any, *, attempts: int = 5, base_delay: float = 0.05, max_delay: float = 2.0,
                 sleep: Callable[[float], None] = time.sleep, rng: Callable[[], float] = random.random):
        self.client = client
        self.attempts = max(1, attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep
        self.rng = rng

    def delay(self, retry: int) -> float:
        """Sleep before retry number `retry` (0-based)."""
        return self.rng() * min(self.max_delay, self.base_delay * 2 ** retry)

    def __call__(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        method = getattr(self.client, _snake(operation))
        for attempt in range(self.attempts):
            try:
                return method(**kwargs)
            except ClientError as exc:
                if not is_transient(exc):
                    raise translate(exc, operation) from exc
                if attempt + 1 == self.attempts:
                    raise BackendUnavailable(
                        f"DynamoDB kept refusing {operation} ({code_of(exc)}) after {self.attempts} tries; "
                        "try again later") from exc
                self.sleep(self.delay(attempt))
            except ParamValidationError:
                raise   # a malformed request is a bug here, not an outage
            except BotoCoreError as exc:   # no endpoint, no credentials, connection reset
                raise BackendUnavailable(f"cannot reach DynamoDB for {operation}: {type(exc).__name__}") from exc
        raise AssertionError("unreachable")


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")
