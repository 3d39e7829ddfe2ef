"""The trigger routes: add, list and remove the S3 prefixes that submit a job
when objects land under them (the trigger function submits the jobs).

A trigger may watch only where the deployment lets it (GQA_TRIGGER_BUCKETS,
never GQA_CHECKPOINT_BUCKET or GQA_MANIFEST_BUCKET: gqa.models.trigger.TriggerPlaces);
elsewhere it is refused with 400 SpecError and nothing is written. So is a
trigger whose job names a code bundle that is not stored; one that is gets
a copy of its own, deleted with the trigger (gqa.services.triggers)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from gqa.http import wire
from gqa.models.errors import SpecError
from gqa.models.loader import validate
from gqa.models.trigger import Trigger, parse_debounce
from gqa.services.access import Action, Principal, authorize, sees_private
from gqa.services.teams import for_team
from lambdas import environment
from lambdas.api.container import container, logger
from lambdas.api.request import app, body, caller, query

TRIGGER_FIELDS = ("bucket", "prefix", "suffix", "spec", "debounce")


@app.post("/triggers")
def add_trigger() -> Response:
    who = caller()
    request = body()
    if not isinstance(request, dict) or not isinstance(request.get("spec"), dict):
        raise SpecError('the request body must be {"bucket": ..., "prefix": ..., "spec": {...}}')
    unknown = sorted(set(request) - set(TRIGGER_FIELDS))
    if unknown:
        raise SpecError(f"unknown field(s) {', '.join(unknown)}; expected some of {', '.join(TRIGGER_FIELDS)}")
    bucket, prefix, suffix = request.get("bucket"), request.get("prefix"), request.get("suffix")
    if not isinstance(bucket, str) or not isinstance(prefix, str):
        raise SpecError('bucket and prefix must be strings (prefix "" for the whole bucket)')
    if suffix is not None and not isinstance(suffix, str):
        raise SpecError("suffix must be a string, or left out")
    debounce = request.get("debounce")
    if debounce is not None and (isinstance(debounce, bool) or not isinstance(debounce, (int, str))):
        raise SpecError('debounce must be seconds or a duration such as "2m"')
    spec = validate(request["spec"], source="the trigger's job")
    authorize(who, Action.ADD_TRIGGER)
    spec = for_team(container().store, spec, who)     # its jobs are the owner's: the owner's team, checked now
    # the bundle `gqa trigger add` uploaded: a trigger keeps its own copy of it, for every burst
    missing = container().code.missing(spec, again="add the trigger again with gqa trigger add")
    if missing:
        raise SpecError(missing)
    # the ARN API Gateway verified goes with it: the trigger function judges the owner's rights again at each burst
    trigger = container().triggers().add(bucket, prefix, spec.model_dump_json(), who.owner, parse_debounce(debounce),
                                      suffix=suffix, places=environment.trigger_places(), owner_arn=who.arn)
    logger.info("trigger added", extra={"trigger_id": trigger.id, "watches": trigger.describe()})
    return Response(201, content_types.APPLICATION_JSON, json.dumps(_trigger(who, trigger)))


@app.get("/triggers")
def list_triggers() -> dict[str, Any]:
    who = caller()
    authorize(who, Action.READ_TRIGGERS)
    return {"triggers": [_trigger(who, t) for t in container().triggers().list(owner=query("owner"))]}


@app.delete("/triggers/<trigger_id>")
def remove_trigger(trigger_id: str) -> dict[str, Any]:
    who = caller()
    service = container().triggers()
    authorize(who, Action.REMOVE_TRIGGER, [service.get(trigger_id)])
    removed = service.remove(trigger_id)
    logger.info("trigger removed", extra={"trigger_id": trigger_id, "watched": removed.describe()})
    return _trigger(who, removed)


def _trigger(who: Principal, trigger: Trigger) -> dict[str, Any]:
    return wire.trigger_to_dict(trigger, with_env=sees_private(who, trigger))
