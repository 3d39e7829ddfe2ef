"""A conditional write to one item (PutItem, UpdateItem) that knows its own
write when its answer was lost.

botocore retries a write that got a 5xx, a throttle or no answer, and
`Retrying` retries InternalServerError too. When a try was applied but its
answer lost, the next try meets the item as that try left it, fails its own
condition and answers ConditionalCheckFailed: read as a lost race, the write
happened and the caller is told it did not. (TransactWriteItems is safe: its
ClientRequestToken makes a retry of the same request idempotent.)

So `write_once` gives the write a fresh token, stored in WRITE_TOKEN, adds
"not already holding it" to its condition (whatever the condition, a retry
never applies it twice) and asks for the item on a failed condition
(ReturnValuesOnConditionCheckFailure ALL_OLD, no extra cost). An item holding
the token was written by this very request: that is success (`written_by`,
the rule). The token is fresh per write, so no other write can hold it and no
count of tries is needed. A later write that replaced the token leaves
nothing to tell by: the write reads as lost, as the race it then also is."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from .errors import ConditionFailed, Retrying

WRITE_TOKEN = "wtok"   # the token of the last guarded write that set it
_NAME, _VALUE = "#gqa_wtok", ":gqa_wtok"
_SET = re.compile(r"\bSET\b")   # names and values are placeholders: a bare SET is the clause's keyword


def written_by(item: Mapping[str, Any] | None, token: str) -> bool:
    """Whether the item, as a failed condition returned it (DynamoDB's JSON),
    holds the write carrying `token`: that write was applied."""
    return item is not None and item.get(WRITE_TOKEN) == {"S": token}


def with_token(operation: str, request: dict[str, Any], token: str) -> dict[str, Any]:
    """The request writing `token` too, its condition refusing an item that already holds it."""
    if "ConditionExpression" not in request:
        raise ValueError(f"{operation} without a condition needs no write token")
    out = {**request, "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
           "ExpressionAttributeNames": {**request.get("ExpressionAttributeNames", {}), _NAME: WRITE_TOKEN},
           "ExpressionAttributeValues": {**request.get("ExpressionAttributeValues", {}), _VALUE: {"S": token}},
           "ConditionExpression": f"({request['ConditionExpression']}) AND "
                                  f"(attribute_not_exists({_NAME}) OR {_NAME} <> {_VALUE})"}
    if operation == "PutItem":
        out["Item"] = {**request["Item"], WRITE_TOKEN: {"S": token}}
    elif operation == "UpdateItem":
        update = request["UpdateExpression"]
        out["UpdateExpression"] = (_SET.sub(f"SET {_NAME} = {_VALUE},", update, count=1) if _SET.search(update)
                                   else f"SET {_NAME} = {_VALUE} {update}")
    else:   # a deleted item keeps no token to tell by
        raise ValueError(f"{operation} cannot carry a write token")
    return out


def write_once(call: Retrying, operation: str, **request: Any) -> dict[str, Any]:
    """`call(operation, **request)` for a PutItem or UpdateItem with a
    ConditionExpression, where an earlier try of it that was applied counts as
    done: its answer then has, as Attributes, the item as it is now (what
    ALL_NEW answers). Raises Conflict when the condition failed for another's write."""
    token = uuid.uuid4().hex
    try:
        return call(operation, **with_token(operation, request, token))
    except ConditionFailed as lost:
        if written_by(lost.item, token):
            return {"Attributes": lost.item}
        raise
