"""The shared daemon's API: the AWS API's routes and JSON (lambdas/api), over
the daemon's socket, so the CLI's API proxies (cli/aws_backend.py) work
unchanged against it. Every route is authorised with
gqa.services.access.authorize, as the Lambda does; the caller is the Unix
user of the socket's peer credentials (daemon/callers.py).

    GET  /whoami
    POST /jobs                       {"spec", "environment"} -> 201 {group, jobs, records}
    GET  /jobs/{ref}?limit&next      a page of the jobs (gqa.http.paging)
    GET  /queue?group&explain&limit&next
    POST /jobs/{refs}/cancel|requeue|hold|release|approve|deny   ({"reason"} for deny)
    POST /jobs/{ref}/update          {"time", "priority", "gpus"} (each optional)
    GET  /jobs/{id}/logs?attempt&token&limit        its owner and admins
    GET  /quota, PUT /quota/teams/{team}, PUT /quota/teams/{team}/members, PUT /quota/policy (admins),
    GET  /cost?team&period&jobs
    GET  /history?since&until&owner&team&state&group&name&limit&next
    GET  /overview?head&events       what `gqa top` shows (OverviewService)

Local differences: a submission's environment IS stored (a local job starts
from the submitting shell's environment, as Slurm's --export=ALL), and is
never sent back (the wire codec withholds it); jobs are recorded at once
(201, not the Lambda's 202). Errors answer {"error": <class name>,
"message": <one line>} with gqa.services.api_errors' status."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from gqa import settings_codec
from gqa.http import paging, wire
from gqa.models.errors import BackendUnavailable, GqaError, NotFound, SpecError
from gqa.models.loader import validate
from gqa.services.access import Action, LocalAccess, Principal, authorize
from gqa.services.api_errors import error_body, status_of
from gqa.services.logs import DEFAULT_LIMIT as LOG_LIMIT
from gqa.services.quota import wire_members

log = logging.getLogger("gqa.daemon")

Answer = tuple[int, Any]
METHODS = frozenset({"GET", "POST", "PUT", "DELETE"})
ACTIONS = {"cancel": Action.CANCEL, "requeue": Action.REQUEUE, "hold": Action.HOLD, "release": Action.RELEASE,
           "approve": Action.APPROVE, "deny": Action.DENY}


class Request:
    """What a route reads: the query (strings, or JSON scalars) and the body."""

    def __init__(self, query: dict[str, Any] | None, body: Any):
        if query is not None and not isinstance(query, dict):
            raise SpecError("the query must be a JSON object or null")
        self.params, self.body = query or {}, body

    def text(self, name: str) -> str | None:
        value = self.params.get(name)
        if value is None or value == "":
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise SpecError(f"{name} must be a string, got {value!r}")
        return str(value)

    def number(self, name: str) -> int | None:
        value = self.text(name)
        if value is None:
            return None
        if not value.isdigit():
            raise SpecError(f"{name} must be a whole number, got {value!r}")
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        value = self.params.get(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes"):
            return True
        if str(value).lower() in ("0", "false", "no"):
            return False
        raise SpecError(f"{name} must be true or false, got {value!r}")

    def json(self) -> Any:
        return {} if self.body is None else self.body


class Router:
    """`wiring` hands out the services: .submitter(), .control(), .queries(),
    .quota(), .cost(), .overview() and .logs() (a LogService over LocalLogFiles), as
    cli.backend.LocalBackend does. `access` turns peer credentials into a
    caller for serve(); handle() takes the caller already made."""

    def __init__(self, wiring: Any, access: LocalAccess | None = None):
        self.wiring, self.access = wiring, access or LocalAccess()

    # -- entry points -------------------------------------------------------------------------
    def serve(self, peer: Any, request: dict) -> Answer:
        """daemon.server's Handler: `peer` has .uid and .gid (SO_PEERCRED);
        `request` is {"v": 1, "method", "path", "query", "body"}. Never raises."""
        from .callers import principal_for

        try:
            if request.get("v") != 1:
                raise SpecError(f"unsupported request version {request.get('v')!r}; this daemon speaks 1 "
                                "(is the CLI as new as the daemon?)")
            method, path = request.get("method"), request.get("path")
            if not isinstance(method, str) or not isinstance(path, str):
                raise SpecError("a request needs a method and a path")
            caller = principal_for(peer.uid, peer.gid, self.access)
        except GqaError as exc:
            return status_of(exc), error_body(exc)
        return self.handle(caller, method, path, request.get("query"), request.get("body"))

    def handle(self, caller: Principal, method: str, path: str, query: dict | None, body: Any) -> Answer:
        """(status, JSON body) for one request. Never raises: domain errors
        answer with their status, anything else 500 (and the log has it)."""
        try:
            route, args = self._route(method.upper(), path)
            return route(caller, Request(query, body), *args)
        except GqaError as exc:
            if status_of(exc) >= 500:
                log.warning("%s %s failed for %s: %s", method, path, caller.owner, exc)
            return status_of(exc), error_body(exc)
        except Exception:
            log.exception("%s %s failed for %s", method, path, caller.owner)
            return 500, {"error": "InternalError",
                         "message": "the queue daemon failed on this request; "
                                    "its log (daemon.log in the queue's home) has the details"}

    def _route(self, method: str, path: str) -> tuple[Callable[..., Answer], tuple]:
        parts = path.split("?", 1)[0].strip("/").split("/") if path.startswith("/") else []
        for want, pattern, route in self._table():
            match = pattern.fullmatch("/".join(parts))
            if match and method == want:
                return route, match.groups()
        raise NotFound(f"no such API route: {method} {path}")

    def _table(self):
        seg = r"([^/]+)"
        return (
            ("GET", re.compile("whoami"), self.whoami),
            ("POST", re.compile("jobs"), self.submit),
            ("GET", re.compile(f"jobs/{seg}/logs"), self.logs),
            ("POST", re.compile(f"jobs/{seg}/(cancel|requeue|hold|release|approve|deny)"), self.act),
            ("POST", re.compile(f"jobs/{seg}/update"), self.update),
            ("GET", re.compile(f"jobs/{seg}"), self.status),
            ("GET", re.compile("queue"), self.queue),
            ("GET", re.compile("quota"), self.quota),
            ("PUT", re.compile(f"quota/teams/{seg}"), self.set_team),
            ("PUT", re.compile(f"quota/teams/{seg}/members"), self.set_members),
            ("PUT", re.compile("quota/policy"), self.set_policy),
            ("GET", re.compile("cost"), self.cost),
            ("GET", re.compile("history"), self.history),
            ("GET", re.compile("overview"), self.overview),
            ("GET", re.compile("triggers"), self.triggers),
            ("POST", re.compile("triggers"), self.triggers),
            ("DELETE", re.compile(f"triggers/{seg}"), self.triggers),
        )

    # -- the routes ---------------------------------------------------------------------------
    def whoami(self, who: Principal, _: Request) -> Answer:
        return 200, wire.principal_to_dict(who)

    def submit(self, who: Principal, request: Request) -> Answer:
        raw, environment = wire.submission_from_dict(request.json())
        spec = validate(raw, source="request")
        authorize(who, Action.SUBMIT)
        done = self.wiring.submitter().record(spec, environment=environment, owner=who.owner, caller=who)
        jobs = done.jobs
        log.info("%s submitted %s", who.owner, ",".join(j.id for j in jobs[:3]) + ("..." if len(jobs) > 3 else ""))
        return 201, wire.submitted_to_dict(jobs, done.note)

    def status(self, who: Principal, request: Request, ref: str) -> Answer:
        authorize(who, Action.READ)
        limit, after = paging.check_limit(request.number("limit")), paging.after_of("jobs", request.text("next"))
        page = paging.page_of(self.wiring.queries().jobs(_one(ref)), lambda j: j.seq, limit=limit, after=after)
        return 200, wire.jobs_page_to_dict(page, paging.token("jobs", page.next))

    def queue(self, who: Principal, request: Request) -> Answer:
        authorize(who, Action.READ)
        explain = request.flag("explain", True)
        limit, after = paging.check_limit(request.number("limit")), paging.after_of("queue", request.text("next"))
        group = request.text("group")
        # the view the daemon keeps after its passes while current, else computed (queue_keeper.py)
        keeper = getattr(self.wiring, "queue_keeper", None)   # a daemon's wiring has one; a test's backend not
        view = (keeper and keeper.current(group)) or self.wiring.queries().queue(group=group)
        page = paging.page_of(view.pending, lambda e: e.job.seq, limit=limit, after=after)
        return 200, wire.queue_page_to_dict(view, page, paging.token("queue", page.next), first=after is None,
                                            explain=explain)

    def act(self, who: Principal, request: Request, refs: str, verb: str) -> Answer:
        named = _refs(refs)
        action = ACTIONS[verb]
        control = self.wiring.control()
        if action in (Action.CANCEL, Action.REQUEUE, Action.HOLD, Action.RELEASE):
            queries = self.wiring.queries()
            authorize(who, action, [job for ref in named for job in queries.jobs(ref)])
            if action is Action.CANCEL:
                results = control.cancel(named)
            elif action is Action.REQUEUE:
                results = control.requeue(named)
            elif action is Action.HOLD:
                results = control.hold(named, caller=who.owner)
            else:
                results = control.release(named, caller=who.owner)
        elif action is Action.APPROVE:
            authorize(who, action)
            results = control.approve(named, caller=who.owner)
        else:
            authorize(who, action)
            data = request.json()
            reason = data.get("reason", "") if isinstance(data, dict) else None
            if not isinstance(reason, str):
                raise SpecError('the request body must be {"reason": "..."} or empty')
            results = control.deny(named, caller=who.owner, reason=reason)
        log.info("%s: %s %s", who.owner, verb, {r.job.id: r.action for r in results})
        return 200, wire.results_to_dict(results)

    def update(self, who: Principal, request: Request, ref: str) -> Answer:
        ref = _one(ref)
        changes = wire.update_from_dict(request.json())
        authorize(who, Action.UPDATE, self.wiring.queries().jobs(ref))
        results = self.wiring.control().update(ref, **changes)
        log.info("%s: update %s %s: %s", who.owner, ref, changes, {r.job.id: r.action for r in results})
        return 200, wire.results_to_dict(results)

    def logs(self, who: Principal, request: Request, ref: str) -> Answer:
        limit = request.number("limit")
        page = self.wiring.logs().page(_one(ref), attempt=request.number("attempt"), token=request.text("token"),
                                       limit=LOG_LIMIT if limit is None else limit,
                                       allow=lambda job: authorize(who, Action.READ_LOGS, [job]))
        return 200, page.to_dict()

    def quota(self, who: Principal, _: Request) -> Answer:
        authorize(who, Action.READ)
        return 200, wire.quota_to_dict(self.wiring.quota().show())

    def set_team(self, who: Principal, request: Request, team: str) -> Answer:
        authorize(who, Action.SET_QUOTA)
        team = _one(team)
        changes = wire.changes_from_dict(request.json(), wire.TEAM_CHANGES)
        policy = self.wiring.quota().set(team, **changes)
        log.info("%s set team %s: %s", who.owner, team, changes)
        return 200, {"team": team, "policy": settings_codec.team_policy_to_dict(policy)}

    def set_members(self, who: Principal, request: Request, team: str) -> Answer:
        authorize(who, Action.SET_QUOTA)
        team = _one(team)
        listed = self.wiring.quota().set_members(team, wire_members(request.json()))
        log.info("%s set the members of team %s: %s", who.owner, team, ", ".join(listed) or "none")
        return 200, {"team": team, "members": list(listed)}

    def set_policy(self, who: Principal, request: Request) -> Answer:
        authorize(who, Action.SET_POLICY)
        changes = wire.changes_from_dict(request.json(), wire.POLICY_CHANGES)
        policy = self.wiring.quota().set_policy(**changes)
        log.info("%s set the queue policy: %s", who.owner, changes)
        return 200, settings_codec.policy_to_dict(policy)

    def cost(self, who: Principal, request: Request) -> Answer:
        authorize(who, Action.READ)
        report = self.wiring.cost().report(period=request.text("period"), team=request.text("team"), gpu_hours=True,
                                           jobs=wire.cost_jobs(request.text("jobs")))
        return 200, wire.cost_to_dict(report)

    def history(self, who: Principal, request: Request) -> Answer:
        authorize(who, Action.READ)
        query, token = wire.history_query_from_params(request.text)
        return 200, wire.history_to_dict(self.wiring.history().list(query, token))

    def overview(self, who: Principal, request: Request) -> Answer:
        authorize(who, Action.READ)
        head, events = wire.overview_sizes(request.number("head"), request.number("events"))
        return 200, wire.overview_to_dict(self.wiring.overview().overview(head=head, events=events))

    def triggers(self, who: Principal, request: Request, *_: str) -> Answer:
        raise BackendUnavailable("triggers watch S3 for new objects and run on the AWS backend only; "
                                 "this machine's queue has none")


def _one(segment: str) -> str:
    return unquote(segment)


def _refs(segment: str) -> list[str]:
    """Comma-separated job refs, each quoted on its own (job_path)."""
    refs = [unquote(r) for r in segment.split(",") if r]
    if not refs:
        raise SpecError("name at least one job")
    return refs
