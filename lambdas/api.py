"""The api function: the CLI's backend, behind API Gateway (REST API, AWS_IAM
authorisation, Lambda proxy integration). API Gateway checks the SigV4
signature; the caller is requestContext.identity.userArn, and who that is, and
what they may do, is gqa.services.access's rule (owners, approvers, admins).

Routes (JSON in and out; every job route takes a job id or an array/sweep id,
and cancel/requeue/approve/deny take several, comma-separated):
    GET  /whoami                          the caller: owner name, ARN, roles
    POST /jobs                            {"spec": {...}, "environment": {...}|null} -> 202 {group, jobs, records}
    GET  /jobs/{ref}                      {"jobs": [...]} with their history
    GET  /queue?group=G&explain=false     pending jobs in start order (position, reason, ETA, factors), running jobs
    POST /jobs/{refs}/cancel|requeue|approve|deny   ({"reason": "..."} for deny) -> {"results": [...]}
    GET  /quota                           teams' shares and caps, GPUs in use, the queue policy
    PUT  /quota/teams/{team}              {"share", "max_gpus", "max_gpus_per_user", "budget"} (admins)
    PUT  /quota/policy                    QuotaService.set_policy's fields (admins)
    GET  /cost?team=T&period=2026-11      spend per team against its budget
    GET  /jobs/{id}/logs?attempt=N&token=T&limit=L   one page of a job's output: LogPage.to_dict()
                                          (its owner and admins; NotStarted while it has not started)
    POST /triggers                        {"bucket", "prefix", "suffix"?, "spec": {...}, "debounce"?} -> 201
                                          the trigger, owned by the caller (debounce: seconds or "2m")
    GET  /triggers?owner=O                {"triggers": [...]}: everyone's, or O's (a job's env only to
                                          the trigger's owner and admins)
    DELETE /triggers/{id}                 the trigger removed (its owner or an admin)

A submission is validated and given its job ids here (SubmitService.accept),
then sent to its tier's intake queue; the admit function creates the jobs.
So the answer carries the ids at once, with the jobs SUBMITTED.

Errors answer {"error": "<domain error class>", "message": "..."}: 400
SpecError, 401 NotAuthenticated (no identity), 403 NotPermitted, 404
NotFound, 409 Conflict / InvalidTransition, 422 Rejected, 503
BackendUnavailable; anything else 500 "InternalError", logged.

Environment (read by lambdas/environment.py):
- GQA_JOBS_TABLE, GQA_SETTINGS_TABLE, GQA_LEDGER_TABLE: the tables (triggers
  live in the settings table);
- GQA_INTAKE_URLS: JSON {"high": url, "normal": url, "low": url}, the intake queues;
- GQA_WAKEUP_QUEUE_URL: the dispatcher's, told after cancel/requeue/approve so
  they are carried out at once;
- GQA_POOLS: the pools as the dispatch function has them (a JSON list of
  resources.Pool's fields): their job queues are where a job's earlier
  attempts are looked up by name for its logs;
- GQA_LOG_GROUP (optional, default /aws/batch/job): the log group of job
  definitions that name none (awslogs-group);
- GQA_ACCESS: JSON, see gqa.services.access.AccessPolicy.from_json:
  {"admins": [...], "approvers": [...], "identity_roles": [...]}. Roles live
  in the function's configuration, not in a table: who administers the queue
  changes through the same reviewed deployment as the IAM policies that let
  people call it, and no request pays a read for it.
A missing or invalid setting fails the cold start loudly.

Reads: the container keeps the settings (inventory, policy, teams) for
SETTINGS_TTL seconds, as the other functions do, where they are read most:
submissions (a sweep is many) and the queue (watched). The quota and cost
routes read them afresh: a change is made to the settings as they are, not
as this container last saw them, and `gqa quota show` or `gqa cost` right
after `gqa quota set` shows it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types

from gqa.adapters.aws.batch_logs import DEFAULT_GROUP, BatchLogs
from gqa.adapters.aws.dynamodb_store import SETTINGS_TTL, DynamoDBStore
from gqa.adapters.aws.sqs_intake import SqsIntake
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.adapters.clock import SystemClock
from gqa.models.errors import (BackendUnavailable, Conflict, GqaError, InvalidTransition, NotAuthenticated,
                               NotFound, NotPermitted, Rejected, SpecError)
from gqa.models.loader import validate
from gqa.models.trigger import Trigger, parse_debounce
from gqa.services import wire
from gqa.services.access import AccessPolicy, Action, Principal, authorize
from gqa.services.control import ControlService
from gqa.services.cost import CostService
from gqa.services.logs import DEFAULT_LIMIT, LogService
from gqa.services.queries import QueryService
from gqa.services.quota import QuotaService
from gqa.services.submit import SubmitService
from gqa.services.triggers import TriggerService
from lambdas import environment

logger = Logger(service="gqa-api")
app = APIGatewayRestResolver()

# most specific first: NotAuthenticated is a NotPermitted
STATUS: tuple[tuple[type[GqaError], int], ...] = (
    (SpecError, 400), (NotAuthenticated, 401), (NotPermitted, 403), (NotFound, 404), (Conflict, 409),
    (InvalidTransition, 409), (Rejected, 422), (BackendUnavailable, 503))


class WakeDispatcher:
    """The Waker port over the wake-up queue. The change it follows is already
    stored: a failed wake-up is logged, not reported (the dispatcher's schedule
    carries the change out at its next tick)."""

    def __init__(self, intake: SqsIntake):
        self.intake = intake

    def wake(self) -> None:
        try:
            self.intake.wake_dispatcher()
        except Exception:
            logger.exception("could not wake the dispatcher")


@dataclass(frozen=True)
class Wiring:
    store: DynamoDBStore            # keeps the settings for SETTINGS_TTL
    settings: DynamoDBStore         # the same tables, the settings read afresh: the quota and cost routes'
    intake: SqsIntake
    access: AccessPolicy
    clock: SystemClock
    trigger_store: DynamoDBTriggerStore
    logs: BatchLogs

    def submitter(self) -> SubmitService:
        return SubmitService(self.store, self.clock, intake=self.intake)

    def control(self) -> ControlService:
        return ControlService(self.store, self.clock, WakeDispatcher(self.intake))

    def queries(self) -> QueryService:
        return QueryService(self.store, self.clock)

    def quota(self) -> QuotaService:
        return QuotaService(self.settings)

    def triggers(self) -> TriggerService:
        # adding, listing and removing need only the store; the trigger function submits the jobs
        return TriggerService(self.trigger_store, self.clock)

    def log_pages(self) -> LogService:
        return LogService(self.store, self.logs)


def build() -> Wiring:
    names = environment.table_names()
    intake = SqsIntake(boto3.client("sqs"), environment.intake_urls(), environment.wakeup_url(needed=True))
    dynamodb = boto3.client("dynamodb")
    logs = BatchLogs(boto3.client("batch"), boto3.client("logs"), environment.pools(),
                     log_group=environment.log_group(DEFAULT_GROUP))
    return Wiring(DynamoDBStore(dynamodb, names, settings_ttl=SETTINGS_TTL), DynamoDBStore(dynamodb, names), intake,
                  environment.access(), SystemClock(),
                  DynamoDBTriggerStore(dynamodb, names), logs)


@cache
def wiring() -> Wiring:
    """Built once per container: the clients' connections and credentials are
    reused by every invocation the container serves."""
    return build()


# -- the request -----------------------------------------------------------------------------------
def caller() -> Principal:
    identity = app.current_event.request_context.identity
    principal = wiring().access.principal(identity.user_arn, identity.account_id)
    logger.append_keys(caller=principal.owner)
    return principal


def body() -> Any:
    raw = app.current_event.body
    if not raw:
        return {}
    try:
        return json.loads(app.current_event.decoded_body)
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


def refs_of(path: str) -> list[str]:
    refs = [r for r in path.split(",") if r]
    if not refs:
        raise SpecError("name at least one job")
    logger.set_correlation_id(refs[0])
    return refs


def jobs_named(refs: list[str]):
    queries = wiring().queries()
    return [job for ref in refs for job in queries.jobs(ref)]


# -- routes ----------------------------------------------------------------------------------------
@app.get("/whoami")
def whoami() -> dict[str, Any]:
    return wire.principal_to_dict(caller())


@app.post("/jobs")
def submit() -> Response:
    who = caller()
    request = body()
    if not isinstance(request, dict) or not isinstance(request.get("spec"), dict):
        raise SpecError('the request body must be {"spec": {...}, "environment": {...} or null}')
    environment = request.get("environment")
    if environment is not None and not (isinstance(environment, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in environment.items())):
        raise SpecError("environment must be an object of strings, or null")
    spec = validate(request["spec"], source="request")
    authorize(who, Action.SUBMIT)
    jobs = wiring().submitter().accept(spec, owner=who.owner, environment=environment)
    if jobs:
        logger.set_correlation_id(jobs[0].group)
    logger.info("accepted", extra={"job_ids": [j.id for j in jobs]})
    return Response(202, content_types.APPLICATION_JSON, json.dumps(wire.submitted_to_dict(jobs)))


@app.get("/jobs/<ref>")
def status(ref: str) -> dict[str, Any]:
    authorize(caller(), Action.READ)
    logger.set_correlation_id(ref)
    return wire.jobs_to_dict(wiring().queries().jobs(ref))


@app.get("/queue")
def queue() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    view = wiring().queries().queue(group=query("group"))
    return wire.queue_to_dict(view, explain=flag("explain", True))


@app.post("/jobs/<refs>/cancel")
def cancel(refs: str) -> dict[str, Any]:
    who, named = caller(), refs_of(refs)
    authorize(who, Action.CANCEL, jobs_named(named))
    return _done("cancel", wiring().control().cancel(named, caller=who.owner))


@app.post("/jobs/<refs>/requeue")
def requeue(refs: str) -> dict[str, Any]:
    who, named = caller(), refs_of(refs)
    authorize(who, Action.REQUEUE, jobs_named(named))
    return _done("requeue", wiring().control().requeue(named, caller=who.owner))


@app.post("/jobs/<refs>/approve")
def approve(refs: str) -> dict[str, Any]:
    who, named = caller(), refs_of(refs)
    authorize(who, Action.APPROVE)
    return _done("approve", wiring().control().approve(named, caller=who.owner))


@app.post("/jobs/<refs>/deny")
def deny(refs: str) -> dict[str, Any]:
    who, named = caller(), refs_of(refs)
    authorize(who, Action.DENY)
    request = body()
    reason = request.get("reason", "") if isinstance(request, dict) else None
    if not isinstance(reason, str):
        raise SpecError('the request body must be {"reason": "..."} or empty')
    return _done("deny", wiring().control().deny(named, caller=who.owner, reason=reason))


def _done(verb: str, results) -> dict[str, Any]:
    logger.info(verb, extra={"results": {r.job.id: r.action for r in results}})
    return wire.results_to_dict(results)


@app.get("/quota")
def quota() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    return wire.quota_to_dict(wiring().quota().show())


@app.put("/quota/teams/<team>")
def set_team(team: str) -> dict[str, Any]:
    authorize(caller(), Action.SET_QUOTA)
    changes = wire.changes_from_dict(body(), wire.TEAM_CHANGES)
    policy = wiring().quota().set(team, **changes)
    logger.info("team quota set", extra={"team": team, "changes": changes})
    return {"team": team, "policy": wire.team_policy_to_dict(policy)}


@app.put("/quota/policy")
def set_policy() -> dict[str, Any]:
    authorize(caller(), Action.SET_POLICY)
    changes = wire.changes_from_dict(body(), wire.POLICY_CHANGES)
    policy = wiring().quota().set_policy(**changes)
    logger.info("queue policy set", extra={"changes": {k: str(v) for k, v in changes.items()}})
    return wire.policy_to_dict(policy)


@app.get("/cost")
def cost() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    report = CostService(wiring().settings, wiring().clock).report(period=query("period"), team=query("team"))
    return wire.cost_to_dict(report)


@app.get("/jobs/<ref>/logs")
def logs(ref: str) -> dict[str, Any]:
    who = caller()
    logger.set_correlation_id(ref)
    limit = number("limit")
    page = wiring().log_pages().page(ref, attempt=number("attempt"), token=query("token"),
                                     limit=DEFAULT_LIMIT if limit is None else limit,
                                     allow=lambda job: authorize(who, Action.READ_LOGS, [job]))
    return page.to_dict()


def number(name: str) -> int | None:
    value = query(name)
    if value is None:
        return None
    if not value.isdigit():
        raise SpecError(f"{name} must be a whole number, got {value!r}")
    return int(value)


# -- triggers --------------------------------------------------------------------------------------
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
    trigger = wiring().triggers().add(bucket, prefix, spec.model_dump_json(), who.owner, parse_debounce(debounce),
                                      suffix=suffix)
    logger.info("trigger added", extra={"trigger_id": trigger.id, "watches": trigger.describe()})
    return Response(201, content_types.APPLICATION_JSON, json.dumps(_trigger(who, trigger)))


@app.get("/triggers")
def list_triggers() -> dict[str, Any]:
    who = caller()
    authorize(who, Action.READ_TRIGGERS)
    return {"triggers": [_trigger(who, t) for t in wiring().triggers().list(owner=query("owner"))]}


@app.delete("/triggers/<trigger_id>")
def remove_trigger(trigger_id: str) -> dict[str, Any]:
    who = caller()
    service = wiring().triggers()
    authorize(who, Action.REMOVE_TRIGGER, [service.get(trigger_id)])
    removed = service.remove(trigger_id, who.owner, who.admin)
    logger.info("trigger removed", extra={"trigger_id": trigger_id, "watched": removed.describe()})
    return _trigger(who, removed)


def _trigger(who: Principal, trigger: Trigger) -> dict[str, Any]:
    return wire.trigger_to_dict(trigger, with_env=who.admin or trigger.owner == who.owner)


# -- errors ----------------------------------------------------------------------------------------
def error(status: int, name: str, message: str) -> Response:
    return Response(status, content_types.APPLICATION_JSON, json.dumps({"error": name, "message": message}))


@app.not_found
def no_route(_: Exception) -> Response:
    event = app.current_event
    return error(404, NotFound.__name__, f"no such API route: {event.http_method} {event.path}")


@app.exception_handler(Exception)
def failed(exc: Exception) -> Response:
    if isinstance(exc, GqaError):
        status = next((code for kind, code in STATUS if isinstance(exc, kind)), 500)
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
