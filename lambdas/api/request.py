"""The resolver every route module registers on, and what routes read from
the request: the caller, the JSON body, the query string, the job ids named
in the path."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from gqa.models.errors import SpecError
from gqa.services.access import Principal
from lambdas.api.container import container, logger

app = APIGatewayRestResolver()


def caller() -> Principal:
    identity = app.current_event.request_context.identity
    principal = container().access.principal(identity.user_arn, identity.account_id)
    logger.append_keys(caller=principal.owner)
    return principal


def body() -> Any:
    raw = app.current_event.decoded_body   # the body, base64-decoded where API Gateway encoded it
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        raise SpecError("the request body is not JSON") from None


def query(name: str) -> str | None:
    value = app.current_event.get_query_string_value(name)
    return value if value else None


def flag(name: str, default: bool) -> bool:
    value = query(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise SpecError(f"{name} must be true or false, got {value!r}")


def number(name: str) -> int | None:
    value = query(name)
    if value is None:
        return None
    if not value.isdigit():
        raise SpecError(f"{name} must be a whole number, got {value!r}")
    return int(value)


def refs_of(path: str) -> list[str]:
    refs = [r for r in path.split(",") if r]
    if not refs:
        raise SpecError("name at least one job")
    logger.set_correlation_id(refs[0])
    return refs


def jobs_named(refs: list[str]):
    queries = container().queries()
    return [job for ref in refs for job in queries.jobs(ref)]
