"""A job's output, one page per request (gqa.services.logs.LogService)."""

from __future__ import annotations

from typing import Any

from gqa.http import paging
from gqa.services.access import Action, authorize
from gqa.services.logs import DEFAULT_LIMIT, LogPage
from lambdas.api.container import container, logger
from lambdas.api.request import app, caller, number, query


@app.get("/jobs/<ref>/logs")
def logs(ref: str) -> dict[str, Any]:
    who = caller()
    logger.set_correlation_id(ref)
    limit = number("limit")
    # as many lines as the answer holds beside the rest of the page: escaped text travels up to 7 times
    # its UTF-8, so 10,000 lines of it may pass Lambda's 6 MB; the page's token goes on after the last
    page = container().log_pages().page(ref, attempt=number("attempt"), token=query("token"),
                                     limit=DEFAULT_LIMIT if limit is None else limit,
                                     allow=lambda job: authorize(who, Action.READ_LOGS, [job]),
                                     size=lambda line: paging.encoded_bytes(line) + 1, budget=BUDGET)
    return page.to_dict()


TOKEN_ROOM = 4096   # bytes of a page's token, with room to spare (a job id, an attempt, CloudWatch's token)
BUDGET = paging.ANSWER_BYTES - paging.encoded_bytes(LogPage((), "t" * TOKEN_ROOM, 1, False).to_dict())
