"""GET /code: where `gqa submit` stores the bundle of the submitter's
directory (gqa.models.code), so a researcher's CLI needs no setting for it."""

from __future__ import annotations

from typing import Any

from gqa.adapters.aws.code_store import location
from gqa.services.access import Action, authorize
from lambdas.api.container import container
from lambdas.api.request import app, caller


@app.get("/code")
def code() -> dict[str, Any]:
    authorize(caller(), Action.SUBMIT)
    return location(container().code.bucket)
