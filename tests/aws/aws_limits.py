"""The limits AWS documents for the calls gqa makes, where moto does not
enforce them, so a test meets them as a deployment would:

- AWS Batch SubmitJob: 30 KiB of job payload (service quotas), refused with
  ClientException as Batch does;
- Lambda: a synchronous answer of at most 6 MB; past it API Gateway answers
  502 and the CLI sees no answer, though the function's work is done
  (api_gateway.py applies it);
- API Gateway: 29 s for the integration; a later answer reaches no one (504),
  though the function's work goes on and is done (api_gateway.py applies it);
- DynamoDB: about 1,000 write units a second per partition. Not refused here
  (DynamoDB throttles, and the adapters retry): every write is accounted per
  table and partition key value, so a test can assert a burst stays within
  what one partition takes in the time it has.

- S3: to a reader without s3:ListBucket on the bucket, GetObject and
  HeadObject of a key that does not exist answer 403 AccessDenied, not 404
  (moto answers 404 whatever the rights): `deny_missing_keys` applies that
  rule to one client.

moto already refuses items over 400 KB and transactions over 100 actions.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from collections import Counter
from typing import Any

from botocore.exceptions import ClientError

SUBMIT_JOB_PAYLOAD = 30 * 1024
LAMBDA_ANSWER_BYTES = 6 * 1024 * 1024
API_GATEWAY_TIMEOUT = 29.0   # seconds: REST APIs' integration timeout
PARTITION_WRITE_UNITS_PER_SECOND = 1000
WRITE_UNIT = 1024            # bytes of item per write unit (transactions take two)


class Limits:
    """Installed once on the tests' shared boto3 session (moto_support.session)."""

    def __init__(self) -> None:
        self.write_units: Counter[tuple[str, str]] = Counter()   # (table, partition key value) -> units

    def install(self, session: Any) -> None:
        events = session.events
        if getattr(events, "_gqa_limits", False):
            return   # once per session: the accounting would count twice
        events._gqa_limits = True
        events.register("before-parameter-build.batch.SubmitJob", self._submit_job)
        for operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"):
            events.register(f"before-parameter-build.dynamodb.{operation}", self._writes)

    # -- Batch -----------------------------------------------------------------------------------------
    @staticmethod
    def _submit_job(params: dict[str, Any], model: Any, **_: Any) -> None:
        size = len(json.dumps(params, separators=(",", ":"), default=str).encode())
        if size > SUBMIT_JOB_PAYLOAD:
            raise ClientError({"Error": {"Code": "ClientException",
                                         "Message": f"Job payload size {size} exceeds the maximum {SUBMIT_JOB_PAYLOAD}"}},
                              model.name)

    # -- DynamoDB --------------------------------------------------------------------------------------
    def _writes(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            for action in params.get("TransactItems", []):
                (kind, body), = action.items()
                self._count(body["TableName"], body.get("Item") or body.get("Key") or {}, transactional=True)
        elif model.name == "BatchWriteItem":
            for table, requests in params.get("RequestItems", {}).items():
                for request in requests:
                    put = request.get("PutRequest", {}).get("Item")
                    self._count(table, put or request.get("DeleteRequest", {}).get("Key", {}))
        else:
            self._count(params["TableName"], params.get("Item") or params.get("Key") or {})

    def _count(self, table: str, item: dict[str, Any], *, transactional: bool = False) -> None:
        if not item:
            return
        partition = json.dumps(next(iter(item.values())), sort_keys=True)   # the first key given: the partition's
        units = max(1, math.ceil(len(json.dumps(item).encode()) / WRITE_UNIT)) * (2 if transactional else 1)
        self.write_units[(table, partition)] += units

    def hottest(self, table: str) -> int:
        """The most write units any one partition of `table` took since the last reset."""
        return max((n for (t, _), n in self.write_units.items() if t == table), default=0)

    def reset(self) -> None:
        self.write_units.clear()


LIMITS = Limits()


def gateway_answer(invoke: Callable[[], dict[str, Any]], *,
                   timer: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """What API Gateway makes of a Lambda proxy invocation: past its 29 s
    timeout the caller gets 504 whatever the function answers later; past 6 MB
    of answer, 502 (lambda_answer)."""
    started = timer()
    answer = invoke()
    if timer() - started > API_GATEWAY_TIMEOUT:
        return {"statusCode": 504, "body": json.dumps({"message": "Endpoint request timed out"})}
    return lambda_answer(answer)


def deny_missing_keys(client: Any) -> None:
    """S3 as it answers a reader without s3:ListBucket: a missing key is 403
    AccessDenied (S3 will not say what the reader may not list), not 404."""
    def hook(model: Any, params: dict[str, Any], **_: Any) -> None:
        found = client.list_objects_v2(Bucket=params["Bucket"], Prefix=params["Key"], MaxKeys=1)
        if not any(o["Key"] == params["Key"] for o in found.get("Contents", [])):
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, model.name)
    client.meta.events.register("before-parameter-build.s3.GetObject", hook)
    client.meta.events.register("before-parameter-build.s3.HeadObject", hook)


def lambda_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """What API Gateway makes of a Lambda proxy answer: past 6 MB, Lambda fails the
    invocation and API Gateway answers 502 (the function's work stays done)."""
    if len(json.dumps(answer).encode()) > LAMBDA_ANSWER_BYTES:
        return {"statusCode": 502, "body": json.dumps({"message": "Internal server error"})}
    return answer
