"""GET /overview: the snapshot `gqa top` and `gqa ui` show (OverviewService).
Read-only, for everyone who may read the queue."""

from __future__ import annotations

from typing import Any

from gqa.http import wire
from gqa.services.access import Action, authorize
from lambdas.api.container import container
from lambdas.api.request import app, caller, number


@app.get("/overview")
def overview() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    head, events = wire.overview_sizes(number("head"), number("events"))
    return wire.overview_to_dict(container().overview().overview(head=head, events=events))
