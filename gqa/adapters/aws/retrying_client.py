"""A boto3 client whose calls refused for rate are tried again, for libraries
that take a client and read its errors themselves.

Powertools' idempotency layer (the admit function's) calls DynamoDB through
the client it is given and gives up at the first error. Under throttling
that is the worst place to give up: a refused "admitted, here are the job
ids" update leaves the submission's claim in progress, so every delivery
of the message fails until the claim expires, and the one after it admits
the jobs a second time. Wrapped here, its calls get the patience of gqa's
own (errors.Retrying: capped exponential backoff with full jitter).

Only throttling is retried: a throttled request was not carried out, so
repeating even a conditional put is safe. Any other error, and the last
refusal when the tries run out, reaches the library as the SDK raised it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from .errors import SERVICE_THROTTLING, Retrying, code_of


class RetryingClient:
    def __init__(self, client: Any, **retry: Any):
        self._client = client
        self._retry = Retrying(client, **retry)
        self._operations = set(client.meta.method_to_api_mapping)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name not in self._operations:
            return attribute          # meta, exceptions, paginators: the client's own
        return self._retried(attribute)

    def _retried(self, method: Callable[..., Any]) -> Callable[..., Any]:
        retry = self._retry

        def call(*args: Any, **kwargs: Any) -> Any:
            for attempt in range(retry.attempts):
                try:
                    return method(*args, **kwargs)
                except ClientError as exc:
                    if code_of(exc) not in SERVICE_THROTTLING or attempt + 1 == retry.attempts:
                        raise
                    retry.sleep(retry.delay(attempt))
            raise AssertionError("unreachable")
        return call
