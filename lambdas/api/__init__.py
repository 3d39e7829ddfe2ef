"""The api function: the CLI's backend, behind API Gateway (REST API, AWS_IAM
authorisation, Lambda proxy integration). API Gateway checks the SigV4
signature; the caller is requestContext.identity.userArn, and who that is, and
what they may do, is gqa.services.access's rule (owners, approvers, admins).

Routes (JSON in and out; every job route takes a job id or an array/sweep id,
and cancel/requeue/hold/release/approve/deny take several, comma-separated):
    GET  /whoami                          the caller: owner name, ARN, roles
    GET  /code                            {"bucket", "prefix": "code/", "kept_days", "refresh_days"}: where
                                          `gqa submit` stores the bundle of the submitter's directory
    POST /jobs                            {"spec": {...}, "environment": {...}|null} -> 202 {group, jobs, first}:
                                          the ids and the first job's record (every record of a large
                                          array would pass Lambda's 6 MB answer); a spec whose code
                                          bundle is not stored is refused (400)
    GET  /jobs/{ref}?limit=L&next=T       {"jobs": [...], "next": T|null}: a page of the jobs, with their history
    GET  /queue?group=G&explain=false&limit=L&next=T
                                          a page of the pending jobs in predicted start order (position,
                                          reason, ETA, factors, rank), the GPU figures, the running jobs (first
                                          page), next; G: an array or sweep, or one job (gqa status reads a
                                          pending job's standing there)
    POST /jobs/{refs}/approve|deny        ({"reason": "..."} for deny) -> {"results": [...]}
    POST /jobs/{refs}/cancel|requeue|hold|release?next=T
                                          one bounded step (ControlService.step: what half the time left
                                          holds, paced): {"results": [...], "next": T|null}, an array's
                                          tasks that came out alike as one entry of index runs; ask again
                                          with `next` until it is null
    POST /jobs/{ref}/update               {"time": seconds, "priority": "high", "gpus": 2}, each optional:
                                          a pending job's (or array's pending tasks') new values
                                          -> {"results": [...]}
    GET  /quota                           teams' shares and caps, GPUs in use, the queue policy
    PUT  /quota/teams/{team}              {"share", "max_gpus", "max_gpus_per_user", "budget"} (admins)
    PUT  /quota/teams/{team}/members      {"members": ["alice", "arn:aws:iam::...:user/*"]}: who may submit
                                          for the team, replacing the list (admins); [] leaves only admins
    PUT  /quota/policy                    QuotaService.set_policy's fields (admins)
    GET  /cost?team=T&period=2026-11&jobs=N   spend and GPU-hours per team, the N costliest jobs
    GET  /history?since=S&until=U&owner=O&team=T&state=FAILED,TIMED_OUT&group=G&name=train-*&limit=L&next=T
                                          a page of finished jobs (latest end first) after the running ones, as
                                          job summaries: {"jobs": [...], "next": T|null}; since and until in
                                          epoch seconds, a finished job in the window its end falls in
    GET  /overview?head=N&events=M        what `gqa top` shows: every GPU and its job, the first N pending
                                          (position, reason, ETA), teams against quota and budget, the
                                          latest M transitions (at most 200 each)
    GET  /jobs/{id}/logs?attempt=N&token=T&limit=L   one page of a job's output: LogPage.to_dict()
                                          (its owner and admins; NotStarted while it has not started)
    POST /triggers                        {"bucket", "prefix", "suffix"?, "spec": {...}, "debounce"?} -> 201
                                          the trigger, owned by the caller (debounce: seconds or "2m")
    GET  /triggers?owner=O                {"triggers": [...]}: everyone's, or O's (a job's env only to
                                          the trigger's owner and admins)
    DELETE /triggers/{id}                 the trigger removed (its owner or an admin)

A submission is validated and given its job ids here (SubmitService.accept),
then sent to its tier's intake queue; the admit function creates the jobs.
So the answer carries the ids at once, with the jobs SUBMITTED; until the
admit function has written them (usually within a second), GET /jobs/{ref}
and its logs answer 404 NotAdmitted (a NotStarted): accepted, waiting for
admission (gqa.services.lookup).

Errors answer {"error": "<domain error class>", "message": "..."}: 400
SpecError, 401 NotAuthenticated (no identity), 403 NotPermitted, 404
NotFound, 409 Conflict / InvalidTransition, 422 Rejected, 503
BackendUnavailable; anything else 500 "InternalError", logged.

The two long listings answer in pages (gqa.http.paging: up to 1,000 jobs
a page, the default; Lambda answers in at most 6 MB): pass the previous
page's `next` to read on; it is null on the last page. A queue page is cut
from a whole scheduling pass, so positions and reasons are the whole queue's.

The function's parts: container.py builds the clients and services once per
container (and says which environment variables it reads and which settings
it keeps); request.py holds the resolver and what routes read from a request;
jobs.py, code.py, quota.py (quota and cost), overview.py, history.py, logs.py and
triggers.py register the routes on it. This module maps errors to answers and is the Lambda handler
(lambdas.api.handler); it imports the route modules so that they register."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from gqa.models.errors import GqaError, NotFound
from gqa.services.api_errors import status_of
from lambdas.api import code, history, jobs, logs, overview, quota, triggers  # noqa: F401  (importing them registers their routes)
from lambdas.api.container import container, logger  # noqa: F401  (container: tests and benchmarks reset and read it)
from lambdas.api.request import app


def error(status: int, name: str, message: str) -> Response:
    return Response(status, content_types.APPLICATION_JSON, json.dumps({"error": name, "message": message}))


@app.not_found
def no_route(_: Exception) -> Response:
    event = app.current_event
    return error(404, NotFound.__name__, f"no such API route: {event.http_method} {event.path}")


@app.exception_handler(Exception)
def failed(exc: Exception) -> Response:
    if isinstance(exc, GqaError):
        status = status_of(exc)
        name = type(exc).__name__      # the client raises the class of this name
        if status >= 500:
            logger.warning("request failed", extra={"error": name, "reason": str(exc)})
        else:
            logger.info("request refused", extra={"error": name, "reason": str(exc)})
        return error(status, name, str(exc))
    logger.exception("request failed")
    return error(500, "InternalError", "the gqa API failed on this request; its logs have the details "
                                       f"(request {app.lambda_context.aws_request_id})")


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)
