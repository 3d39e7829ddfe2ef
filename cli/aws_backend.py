"""The CLI's AWS backend: the same services as LocalBackend hands out, as
proxies that call the gqa API and rebuild the domain objects with the wire
codec, so each command prints the same whichever backend answered."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, TypeVar

from gqa import settings_codec
from gqa.http import wire
from gqa.models.errors import BackendUnavailable

# On AWS a job's environment is its image's plus its spec's env: the shell's
# environment of a laptop (credentials among it) is not sent.
SEND_ENVIRONMENT = False


Answer = TypeVar("Answer")    # the API's JSON: one answer, or a listing's pages
Decoded = TypeVar("Decoded")


def _decode(decode: Callable[[Answer], Decoded], data: Answer) -> Decoded:
    from gqa.models.errors import SpecError

    try:
        return decode(data)
    except (KeyError, TypeError, ValueError, AttributeError, SpecError) as exc:
        raise BackendUnavailable(f"the gqa API answered in an unexpected form ({type(exc).__name__}: {exc}); "
                                 "is the CLI as new as the deployment?") from None


@dataclass
class Submitter:
    api: Any                      # anything with .call(method, path, query=, body=): the API, the shared daemon
    send_environment: bool = SEND_ENVIRONMENT     # the shared local daemon starts jobs from it (daemon_backend.py)

    def submit(self, spec, *, environment: dict[str, str] | None = None, owner: str | None = None):
        """`owner` is ignored: the API takes it from the caller's signature."""
        body = {"spec": spec.model_dump(mode="json"), "environment": environment if self.send_environment else None}
        return _decode(wire.submitted_from_dict, self.api.call("POST", "/jobs", body=body))


def _note(line: str) -> None:
    sys.stderr.write(line + "\n")


@dataclass
class Control:
    api: Any
    progress: Callable[[str], None] = _note    # a line on how far a change in steps got

    def _act(self, refs: list[str], action: str, body: dict | None = None):
        from gqa.adapters.aws.api_client import job_path

        return _decode(wire.results_from_dict, self.api.call("POST", job_path(refs, action), body=body))

    def _steps(self, refs: list[str], action: str):
        """A change the API makes a bounded step at a time (a large array): asked
        again with each answer's `next` until it is null, saying on stderr how far
        it got. A step asked again (an answer lost) changes nothing twice. The
        results in the order of the refs, an array's tasks by index."""
        from gqa.adapters.aws.api_client import job_path

        results, token, seen = [], None, set()
        while True:
            answer = self.api.call("POST", job_path(refs, action), query={"next": token} if token else None)
            results += _decode(wire.results_from_dict, answer)
            token = answer.get("next")
            if token is None:
                break
            if not isinstance(token, str) or token in seen:
                raise BackendUnavailable(f"the gqa API answered a {action} with a step token it gave before "
                                         f"({token!r}); is the CLI as new as the deployment?")
            seen.add(token)
            self.progress(f"gqa: {action}: {len(results):,} jobs so far; going on")
        return _in_order(results)

    def cancel(self, refs: list[str]):
        return self._steps(refs, "cancel")

    def requeue(self, refs: list[str]):
        return self._steps(refs, "requeue")

    def hold(self, refs: list[str], *, caller: str | None = None):
        """`caller` is ignored, as in approve: the API takes it from the caller's signature."""
        return self._steps(refs, "hold")

    def release(self, refs: list[str], *, caller: str | None = None):
        return self._steps(refs, "release")

    def update(self, ref: str, *, time: int | None = None, priority: str | None = None, gpus: int | None = None):
        return self._act([ref], "update", wire.update_to_dict(time=time, priority=priority, gpus=gpus))

    def approve(self, refs: list[str], *, caller: str | None = None):
        return self._act(refs, "approve")

    def deny(self, refs: list[str], *, caller: str | None = None, reason: str = ""):
        return self._act(refs, "deny", {"reason": reason})


def _in_order(results: list) -> list:
    """Each job's first result, by group in the order first met, an array's tasks by index
    (a step answers its tasks in the store's order of their ids, "12_10" before "12_2")."""
    rank: dict[str, int] = {}
    once: dict[str, Any] = {}
    for r in results:
        rank.setdefault(r.job.group, len(rank))
        once.setdefault(r.job.id, r)
    return sorted(once.values(), key=lambda r: (rank[r.job.group], r.job.array_index or 0))


def _pages(api: Any, path: str, query: dict[str, Any] | None = None) -> list[dict]:
    """Every page of a paged listing (gqa.http.paging): each answer's
    `next` asks for the one after, until it is null."""
    pages, token, seen = [], None, set()
    while True:
        page = api.call("GET", path, query={**(query or {}), "next": token})
        pages.append(page)
        token = page.get("next")
        if token is None:
            return pages
        if not isinstance(token, str) or token in seen:
            raise BackendUnavailable(f"the gqa API answered {path} with a page token it gave before "
                                     f"({token!r}); is the CLI as new as the deployment?")
        seen.add(token)


@dataclass
class Queries:
    api: Any

    def queue(self, *, group: str | None = None):
        return _decode(wire.queue_from_pages, _pages(self.api, "/queue", {"group": group}))

    def jobs(self, ref: str, *, history: bool = True):
        return self.jobs_and_admitting(ref, history=history)[0]

    def jobs_and_admitting(self, ref: str, *, history: bool = True):
        """The jobs, and how many more of the group's tasks are still being admitted; history=False:
        without their transitions (asked only when False, which a deployment before it ignores)."""
        from gqa.adapters.aws.api_client import job_path

        pages = _pages(self.api, job_path(ref), None if history else {"history": "false"})
        return _decode(wire.jobs_from_pages, pages), _decode(wire.admitting_from_pages, pages)


@dataclass
class Quota:
    api: Any

    def show(self):
        return _decode(wire.quota_from_dict, self.api.call("GET", "/quota"))

    def policy(self):
        return self.show().policy

    def set(self, team: str, **changes):
        from urllib.parse import quote

        data = self.api.call("PUT", f"/quota/teams/{quote(team, safe='')}", body=wire.changes_to_dict(changes))
        return _decode(lambda d: settings_codec.team_policy_from_dict(d["policy"]), data)

    def set_members(self, team: str, members: list[str]):
        from urllib.parse import quote

        data = self.api.call("PUT", f"/quota/teams/{quote(team, safe='')}/members", body={"members": members})
        return _decode(lambda d: tuple(d["members"]), data)

    def set_policy(self, **changes):
        data = self.api.call("PUT", "/quota/policy", body=wire.changes_to_dict(changes))
        return _decode(settings_codec.policy_from_dict, data)


@dataclass
class Cost:
    api: Any

    def report(self, *, period: str | None = None, team: str | None = None, gpu_hours: bool = False, jobs: int = 0):
        # the route always counts GPU-hours: it is gqa cost's, never a live view's
        return _decode(wire.cost_from_dict, self.api.call("GET", "/cost", query={"period": period, "team": team,
                                                                                 "jobs": str(jobs) if jobs else None}))


@dataclass
class Overviews:
    api: Any

    def overview(self, *, head: int | None = None, events: int | None = None):
        return _decode(wire.overview_from_dict, self.api.call("GET", "/overview",
                                                             query={"head": head, "events": events}))


@dataclass
class History:
    """HistoryService's list and rows over GET /history."""

    api: Any

    def list(self, query, token: str | None = None):
        return _decode(wire.history_from_dict,
                       self.api.call("GET", "/history", query=wire.history_query_to_params(query, token)))

    def rows(self, query):
        from dataclasses import replace

        from gqa.services.history import MAX_LIMIT

        query, token, seen = replace(query, limit=MAX_LIMIT), None, set()
        while True:
            page = self.list(query, token)
            yield from page.rows
            if page.next is None:
                return
            if page.next in seen:
                raise BackendUnavailable(f"the gqa API answered /history with a page token it gave before "
                                         f"({page.next!r}); is the CLI as new as the deployment?")
            seen.add(token := page.next)


@dataclass
class Triggers:
    """TriggerService's add/list/remove as cli/trigger.py calls them. The owner
    is the caller's IAM identity (the API's rule), so `owner`, `caller` and
    `admin` are not sent: the API decides them from the signature."""

    api: Any

    def add(self, bucket: str, prefix: str, spec_json: str, owner: str | None, debounce: int,
            suffix: str | None = None):
        import json

        from gqa.models.trigger import Trigger

        body = {"bucket": bucket, "prefix": prefix, "suffix": suffix, "spec": json.loads(spec_json),
                "debounce": debounce}
        return _decode(Trigger.from_dict, self.api.call("POST", "/triggers", body=body))

    def list(self, owner: str | None = None):
        return _decode(wire.triggers_from_dict, self.api.call("GET", "/triggers", query={"owner": owner}))

    def remove(self, trigger_id: str):
        from urllib.parse import quote

        from gqa.models.trigger import Trigger

        return _decode(Trigger.from_dict, self.api.call("DELETE", f"/triggers/{quote(trigger_id, safe='')}"))


@dataclass
class LogPages:
    """LogService.page over GET /jobs/{id}/logs; NotStarted comes back as NotStarted (by its name)."""

    api: Any

    def page(self, ref: str, attempt: int | None = None, token: str | None = None):
        from gqa.adapters.aws.api_client import job_path
        from gqa.services.logs import LogPage

        data = self.api.call("GET", job_path(ref, "logs"), query={"attempt": attempt, "token": token})
        return LogPage.from_dict(data)


class ApiServices:
    """The services as proxies over any `api` with .call(method, path, query=, body=):
    the AWS API over HTTPS, or a shared box's daemon over its socket."""

    api: Any

    def submitter(self) -> Submitter:
        return Submitter(self.api)

    def control(self) -> Control:
        return Control(self.api)

    def queries(self) -> Queries:
        return Queries(self.api)

    def quota(self) -> Quota:
        return Quota(self.api)

    def cost(self) -> Cost:
        return Cost(self.api)

    def history(self) -> History:
        return History(self.api)

    def log_pages(self) -> LogPages:
        return LogPages(self.api)

    def overview(self) -> Overviews:
        return Overviews(self.api)


@dataclass
class AwsBackend(ApiServices):
    endpoint: str
    region: str | None = None
    aws_profile: str | None = None
    transport: Any = None          # tests inject one; None: HTTPS
    session: Any = None

    local = False
    poll_interval = 5.0            # seconds between reads while waiting (each is an API call)

    @cached_property
    def api(self):
        from gqa.adapters.aws.api_client import ApiClient

        return ApiClient(self.endpoint, self.region, self.session, self.transport, profile=self.aws_profile)

    def triggers(self) -> Triggers:
        return Triggers(self.api)

    def whoami(self) -> dict[str, Any]:
        return self.api.call("GET", "/whoami")

    def code_store(self):
        """Where this deployment keeps code bundles (GET /code), reached with the
        caller's own credentials (the researcher policy's rights under code/)."""
        from gqa.adapters.aws.code_store import S3CodeStore, checked_location

        bucket, _ = checked_location(self.api.call("GET", "/code"))
        return S3CodeStore(self.api.session.client("s3", region_name=self.api.region), bucket)
