"""A job's output, one page per request (gqa.services.logs.LogService)."""

from __future__ import annotations

from typing import Any

from gqa.services.access import Action, authorize
from gqa.services.logs import DEFAULT_LIMIT
from lambdas.api.container import container, logger
from lambdas.api.request import app, caller, number, query


@app.get("/jobs/<ref>/logs")
def logs(ref: str) -> dict[str, Any]:
    who = caller()
    logger.set_correlation_id(ref)
    limit = number("limit")
    page = container().log_pages().page(ref, attempt=number("attempt"), token=query("token"),
                                     limit=DEFAULT_LIMIT if limit is None else limit,
                                     allow=lambda job: authorize(who, Action.READ_LOGS, [job]))
    return page.to_dict()
