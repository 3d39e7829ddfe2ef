"""The limits AWS documents for the calls gqa makes, where moto does not
enforce them, so a test meets them as a deployment would:

- AWS Batch SubmitJob: 30 KiB of job payload (service quotas), refused with
  ClientException as Batch does; and at most 50 tags of the job's and its
  definition's together where they propagate, which Batch takes and then
  fails the job: refused here at once, so a test cannot miss it;
- Lambda: a synchronous answer of at most 6 MB; past it API Gateway answers
  502 and the CLI sees no answer, though the function's work is done
  (api_gateway.py applies it);
- API Gateway: 29 s for the integration; a later answer reaches no one (504),
  though the function's work goes on and is done (api_gateway.py applies it);
- DynamoDB: about 1,000 write units a second per partition. Not refused here
  (DynamoDB throttles, and the adapters retry): every write is accounted per
  table and partition key value, so a test can assert a burst stays within
  what one partition takes in the time it has. A put also writes each
  global secondary index whose keys the item has, on the index partition of
  its key value, with the projected item (the jobs table's indexes project
  it all): accounted as "<table>/<index>". An update's index writes are not
  (its request does not say the item it makes);
- DynamoDB Query: a key condition `BETWEEN :low AND :high` with the low
  bound above the high one is a ValidationException (moto answers no items);
- DynamoDB TransactWriteItems: at most 4 MB of items together (UTF-8 bytes,
  as DynamoDB sizes items), refused with ValidationException;
- SQS: a message of at most 256 KiB, body and attributes (SendMessage and
  each entry of SendMessageBatch), refused with InvalidParameterValue.

- S3: to a reader without s3:ListBucket on the bucket, GetObject and
  HeadObject of a key that does not exist answer 403 AccessDenied, not 404
  (moto answers 404 whatever the rights); a ListBucket granted only under an
  s3:prefix condition (gqa's roles) does not count, as a GET or HEAD carries
  no s3:prefix: `deny_missing_keys` applies that rule to one client.

moto already refuses items over 400 KB and transactions over 100 actions.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from collections import Counter
from typing import Any

from botocore.exceptions import ClientError

from gqa.adapters.aws.tables import TABLES, Table

SUBMIT_JOB_PAYLOAD = 30 * 1024
MAX_TAGS = 50               # a Batch job's and its definition's, where they propagate
_BETWEEN = re.compile(r"BETWEEN\s+(:\w+)\s+AND\s+(:\w+)")
SQS_MESSAGE_BYTES = 256 * 1024
LAMBDA_ANSWER_BYTES = 6 * 1024 * 1024
API_GATEWAY_TIMEOUT = 29.0   # seconds: REST APIs' integration timeout
PARTITION_WRITE_UNITS_PER_SECOND = 1000
WRITE_UNIT = 1024            # bytes of item per write unit (transactions take two)
TRANSACTION_BYTES = 4_000_000   # TransactWriteItems: its items together (4 MB, read as the smaller MB)


class Limits:
    """Installed once on the tests' shared boto3 session (moto_support.session)."""

    def __init__(self) -> None:
        self.write_units: Counter[tuple[str, str]] = Counter()   # (table, partition key value) -> units
        self.definition_tags: dict[str, int] = {}                # job definition name -> its tags

    def install(self, session: Any) -> None:
        events = session.events
        if getattr(events, "_gqa_limits", False):
            return   # once per session: the accounting would count twice
        events._gqa_limits = True
        events.register("before-parameter-build.batch.SubmitJob", self._submit_job)
        events.register("before-parameter-build.batch.RegisterJobDefinition", self._register_job_definition)
        events.register("before-parameter-build.sqs.SendMessage", self._send_message)
        events.register("before-parameter-build.sqs.SendMessageBatch", self._send_message)
        events.register("before-parameter-build.dynamodb.Query", self._query)
        for operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"):
            events.register(f"before-parameter-build.dynamodb.{operation}", self._writes)

    # -- Batch -----------------------------------------------------------------------------------------
    def _submit_job(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        size = len(json.dumps(params, separators=(",", ":"), default=str).encode())
        if size > SUBMIT_JOB_PAYLOAD:
            message = f"Job payload size {size} exceeds the maximum {SUBMIT_JOB_PAYLOAD}"
            raise ClientError({"Error": {"Code": "ClientException", "Message": message}}, model.name)
        if params.get("propagateTags"):
            name = str(params.get("jobDefinition", "")).rsplit("/", 1)[-1].split(":")[0]
            tags = len(params.get("tags") or {}) + self.definition_tags.get(name, 0)
            if tags > MAX_TAGS:
                message = f"{tags} tags of the job and its job definition together; at most {MAX_TAGS}"
                raise ClientError({"Error": {"Code": "ClientException", "Message": message}}, model.name)

    def _register_job_definition(self, params: dict[str, Any], **_: Any) -> None:
        self.definition_tags[params["jobDefinitionName"]] = len(params.get("tags") or {})

    # -- SQS -------------------------------------------------------------------------------------------
    @staticmethod
    def _send_message(params: dict[str, Any], model: Any, **_: Any) -> None:
        for entry in params.get("Entries", [params]):
            size = len(entry.get("MessageBody", "").encode())
            for name, value in (entry.get("MessageAttributes") or {}).items():
                size += len(name.encode()) + len(value.get("DataType", "").encode()) + len(
                    str(value.get("StringValue", value.get("BinaryValue", ""))).encode())
            if size > SQS_MESSAGE_BYTES:
                raise ClientError({"Error": {"Code": "InvalidParameterValue",
                                             "Message": f"One or more parameters are invalid. Reason: Message must "
                                                        f"be shorter than {SQS_MESSAGE_BYTES} bytes ({size})"}},
                                  model.name)

    # -- DynamoDB --------------------------------------------------------------------------------------
    @staticmethod
    def _query(params: dict[str, Any], model: Any, **_: Any) -> None:
        values = params.get("ExpressionAttributeValues") or {}
        for low, high in _BETWEEN.findall(params.get("KeyConditionExpression", "")):
            (kind, a), = values[low].items()
            (_, b), = values[high].items()
            if (float(a) > float(b)) if kind == "N" else (a > b):
                raise ClientError({"Error": {"Code": "ValidationException", "Message": (
                    "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater "
                    f"than or equal to lower bound; lower bound operand: AttributeValue: {{{kind}:{a}}}, "
                    f"upper bound operand: AttributeValue: {{{kind}:{b}}}")}}, model.name)

    def _writes(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            _transaction_bytes(params, model)
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
        schema = _schema(table)
        key = schema.partition.name if schema is not None and schema.partition.name in item else next(iter(item))
        units = max(1, math.ceil(item_bytes(item) / WRITE_UNIT)) * (2 if transactional else 1)
        self.write_units[(table, json.dumps(item[key], sort_keys=True))] += units
        for index in schema.indexes if schema is not None else ():
            if index.partition.name in item and (index.sort is None or index.sort.name in item):
                # projected whole (every index of gqa's tables projects ALL), so the same units
                self.write_units[(f"{table}/{index.name}", json.dumps(item[index.partition.name]))] += units

    def hottest(self, table: str) -> int:
        """The most write units any one partition of `table` took since the last reset."""
        return max((n for (t, _), n in self.write_units.items() if t == table), default=0)

    def hottest_with_indexes(self, table: str) -> tuple[int, str, str]:
        """The most write units any one partition of `table` or of one of its
        indexes took since the last reset: (units, "<table>[/<index>]", key value)."""
        found = [(n, t, k) for (t, k), n in self.write_units.items() if t == table or t.startswith(table + "/")]
        return max(found, default=(0, table, ""))

    def reset(self) -> None:
        self.write_units.clear()


LIMITS = Limits()


def _transaction_bytes(params: dict[str, Any], model: Any) -> None:
    """DynamoDB refuses a transaction whose items pass 4 MB together: a Put's
    item counted, an Update's, Delete's or ConditionCheck's key and the values
    it names (no more than the item DynamoDB counts, so never a false refusal)."""
    size = 0
    for action in params.get("TransactItems", []):
        (body,) = action.values()
        size += sum(item_bytes(body.get(part) or {}) for part in ("Item", "Key", "ExpressionAttributeValues"))
    if size > TRANSACTION_BYTES:
        raise ClientError({"Error": {"Code": "ValidationException", "Message": (
            f"Transaction request cannot be larger than 4 MB ({size} bytes of items)")}}, model.name)


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it, from its AttributeValue form: each
    name in UTF-8 plus its value (strings in UTF-8, numbers about one byte per
    two digits plus one, 3 bytes and 1 per element for lists and maps)."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: dict[str, Any]) -> int:
    (kind, raw), = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return len(raw.lstrip("-").replace(".", "")) // 2 + 2
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "B":
        return len(raw)
    if kind == "L":
        return 3 + sum(1 + _value_bytes(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_bytes(v) for k, v in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(v).encode()) for v in raw)
    raise ValueError(f"no DynamoDB size for {kind}")


def _schema(table: str) -> Table | None:
    """gqa's table a deployed (prefixed) table name is, if any."""
    return next((t for t in TABLES if table.endswith(t.logical)), None)


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


def deny_missing_keys(client: Any, *, listable: tuple[str, ...] = ()) -> None:
    """S3 as it answers a reader whose s3:ListBucket holds only under an
    s3:prefix condition (StringLike "<p>*" for each of `listable`; none: no
    ListBucket at all), as gqa's roles hold it. A GET or HEAD carries no
    s3:prefix, so the condition never matches it: a missing key is 403 (GET:
    AccessDenied; HEAD: a bare 403), not 404. A listing carries its Prefix:
    denied unless under one of `listable`."""
    checking: list[str] = []

    def exists(bucket: str, key: str) -> bool:
        checking.append(key)   # S3's own look, not the reader's listing
        try:
            found = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        finally:
            checking.pop()
        return any(o["Key"] == key for o in found.get("Contents", []))

    def read(model: Any, params: dict[str, Any], **_: Any) -> None:
        if not exists(params["Bucket"], params["Key"]):
            code, message = ("AccessDenied", "Access Denied") if model.name == "GetObject" else ("403", "Forbidden")
            raise ClientError({"Error": {"Code": code, "Message": message}}, model.name)

    def listing(model: Any, params: dict[str, Any], **_: Any) -> None:
        if not checking and not any(params.get("Prefix", "").startswith(p) for p in listable):
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, model.name)
    client.meta.events.register("before-parameter-build.s3.GetObject", read)
    client.meta.events.register("before-parameter-build.s3.HeadObject", read)
    client.meta.events.register("before-parameter-build.s3.ListObjectsV2", listing)


def lambda_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """What API Gateway makes of a Lambda proxy answer: past 6 MB, Lambda fails the
    invocation and API Gateway answers 502 (the function's work stays done)."""
    if len(json.dumps(answer).encode()) > LAMBDA_ANSWER_BYTES:
        return {"statusCode": 502, "body": json.dumps({"message": "Internal server error"})}
    return answer
