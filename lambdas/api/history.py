"""GET /history: a page of finished and running jobs as job summaries
(gqa.services.history), the query's window and filters in the URL's query.
Everyone may read it, as the queue: the summaries carry no spec or environment.

A summary grows with its job's attempts (each one's run, about 40 bytes), so
1,000 of them pass Lambda's 6 MB answer at about 130 attempts a job: a page
holds as many as paging.ANSWER_BYTES holds, as they travel. Where the page
the store gave is larger, the page is asked for again with the limit that
fits, so its `next` is the store's own token after the last row it holds and
the pages add up to every job once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gqa.http import paging, wire
from gqa.services.access import Action, authorize
from lambdas.api.container import container
from lambdas.api.request import app, caller, query

TOKEN_ROOM = 4096   # bytes of a page's token, with room to spare (a time and a job id, in base64)
BUDGET = paging.ANSWER_BYTES - paging.encoded_bytes({"jobs": [], "next": "t" * TOKEN_ROOM})


@app.get("/history")
def history() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    wanted, token = wire.history_query_from_params(query)
    service = container().history()
    while True:
        answer = wire.history_to_dict(service.list(wanted, token))
        fits = paging.fitting((paging.encoded_bytes(row) for row in answer["jobs"]), BUDGET)
        if fits == len(answer["jobs"]):
            return answer
        # fewer each time (a job may have run again between two reads), one at least: it ends
        wanted = replace(wanted, limit=fits)
