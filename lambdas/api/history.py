"""GET /history: a page of finished and running jobs as job summaries
(gqa.services.history), the query's window and filters in the URL's query.
Everyone may read it, as the queue: the summaries carry no spec or environment."""

from __future__ import annotations

from typing import Any

from gqa.http import wire
from gqa.services.access import Action, authorize
from lambdas.api.container import container
from lambdas.api.request import app, caller, query


@app.get("/history")
def history() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    wanted, token = wire.history_query_from_params(query)
    return wire.history_to_dict(container().history().list(wanted, token))
