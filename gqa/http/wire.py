"""The API's JSON forms of what the services return, and of the requests
that change quotas: one codec for the Lambda that writes them and the CLI
that reads them back into the same objects, so a command prints the same
whichever backend answered. Pure: dicts in, objects out.

A job travels without its spec and its submitter's environment: every caller
may read the queue, and a spec's env or a shell's environment may hold
secrets. A record read back has `spec_json` "" and `submit_env` None. For the
same reason a trigger's job travels without its env to anyone but the
trigger's owner and admins (everyone may list triggers), and without its
owner's ARN, which only the trigger function needs (to judge the owner's
rights again at each burst).

Decoders of answers raise KeyError/TypeError/ValueError on a malformed one
(the client turns them into BackendUnavailable); decoders of requests raise
SpecError, which the API answers with 400."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..models.accounting import JobSummary
from ..models.errors import SpecError
from ..models.expand import index_runs, run_indices
from ..models.job import JobRecord, JobState, Request, Transition
from ..models.trigger import Trigger
from ..ports import JobEvent
from ..scheduling.snapshot import Factors, Weights
from ..services.access import Principal, roles_text
from ..services.control import ControlResult, ControlStep, Position
from ..services.cost import CostReport, JobCost, TeamCost
from ..services.history import HistoryPage, HistoryQuery
from ..services.overview import EVENTS, HEAD, GpuSlot, HeadEntry, Overview, RunningJob, TeamLoad
from ..services.queries import QueueEntry, QueueView
from ..services.quota import QuotaView, TeamQuota
from ..settings_codec import policy_from_dict, policy_to_dict, team_policy_from_dict, team_policy_to_dict
from .paging import Page

WITHHELD = ("spec_json", "submit_env")
_JOB_FIELDS = {f.name for f in fields(JobRecord)}


# -- jobs ---------------------------------------------------------------------------------------
def job_to_dict(job: JobRecord) -> dict[str, Any]:
    data = {name: getattr(job, name) for name in _JOB_FIELDS if name not in WITHHELD}
    data.update(state=job.state.value, request=job.request.value if job.request else None,
                assigned=list(job.assigned),
                history=[{"state": t.state.value, "at": t.at, "reason": t.reason} for t in job.history])
    return data


def job_from_dict(data: dict[str, Any]) -> JobRecord:
    values = {k: v for k, v in data.items() if k in _JOB_FIELDS and k not in WITHHELD}   # newer fields: ignored
    values.update(
        state=JobState(data["state"]), request=Request(data["request"]) if data.get("request") else None,
        assigned=tuple(data.get("assigned") or ()), spec_json="", submit_env=None,
        history=tuple(Transition(JobState(t["state"]), float(t["at"]), str(t["reason"]))
                      for t in data.get("history") or ()))
    return JobRecord(**values)


def jobs_to_dict(jobs: list[JobRecord]) -> dict[str, Any]:
    return {"jobs": [job_to_dict(j) for j in jobs]}


def jobs_from_dict(data: dict[str, Any]) -> list[JobRecord]:
    return [job_from_dict(j) for j in data["jobs"]]


def jobs_page_to_dict(page: Page[JobRecord], next_token: str | None, admitting: int = 0) -> dict[str, Any]:
    """A page of a job's or a group's records (paging.py): {"jobs": [...], "next": token or null,
    "admitting": how many more of the group's tasks are still being admitted}."""
    return {"jobs": [job_to_dict(j) for _, j in page.items], "next": next_token, "admitting": admitting}


def admitting_from_pages(pages: list[dict[str, Any]]) -> int:
    """The tasks still being admitted, as the last page read says (an older API: none)."""
    return int(pages[-1].get("admitting") or 0) if pages else 0


def jobs_from_pages(pages: list[dict[str, Any]]) -> list[JobRecord]:
    """The records of every page, in order; each job once (a job is on one page only)."""
    return [job for data in pages for job in jobs_from_dict(data)]


def submission_from_dict(data: Any) -> tuple[dict[str, Any], dict[str, str] | None]:
    """POST /jobs's body: the raw spec (validated by the caller, which names
    its source) and the submitter's environment, or None. SpecError if malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
        raise SpecError('the request body must be {"spec": {...}, "environment": {...} or null}')
    environment = data.get("environment")
    if environment is not None and not (isinstance(environment, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in environment.items())):
        raise SpecError("environment must be an object of strings, or null")
    return data["spec"], environment


@dataclass(frozen=True)
class Submitted:
    """What a submission answers: its group, how many jobs, their ids as runs
    of array indices, and the first job's record (an array's tasks differ
    from it only by index). Never every record, nor every id: a 100,000-task
    array's answer is a few hundred bytes (Lambda answers at most 6 MB)."""

    group: str
    count: int
    runs: tuple[tuple[int, int, int], ...]   # [first, last, step] of array indices; () for a single job
    first: JobRecord
    # what the next pass will do to it (held by its team's budget, cancelled for a dependency that can
    # never be met), where the service answering knows at once (services/submit.Recorded.note)
    note: str | None = None

    @classmethod
    def of(cls, jobs: list[JobRecord]) -> "Submitted":
        first = jobs[0]
        if len(jobs) == 1 and first.array_index is None:
            return cls(first.group or first.id, 1, (), first)
        runs = index_runs([j.array_index if j.array_index is not None else n for n, j in enumerate(jobs)])
        return cls(first.group, len(jobs), tuple((a, b, c) for a, b, c in runs), first)

    @property
    def ids(self) -> tuple[str, ...]:
        """Every job id, in order (made from the runs: nothing travelled for them)."""
        if not self.runs:
            return (self.first.id,)
        return tuple(f"{self.group}_{i}" for i in run_indices(self.runs))

    @property
    def first_id(self) -> str:
        return self.first.id if not self.runs else f"{self.group}_{self.runs[0][0]}"

    @property
    def last_id(self) -> str:
        return self.first.id if not self.runs else f"{self.group}_{self.runs[-1][1]}"

    @property
    def ref(self) -> str:
        """How commands name the submission: its group for an array or sweep, else the job's id."""
        return self.group if self.runs else self.first.id


def submitted_to_dict(jobs: list[JobRecord], note: str | None = None) -> dict[str, Any]:
    """The answer to a submission: its group, the count, the first and last
    id, the runs of array indices between them, the first job's record, and
    what the next pass will do to it (Submitted.note; left out where nothing)."""
    submitted = Submitted.of(jobs)
    return {"group": submitted.group, "count": submitted.count, "first_id": submitted.first_id,
            "last_id": submitted.last_id, "runs": [list(r) for r in submitted.runs],
            "first": job_to_dict(submitted.first),
            **({"note": note} if note else {})}


def submitted_from_dict(data: dict[str, Any]) -> Submitted:
    first = job_from_dict(data["first"])
    if "count" not in data:   # an API older than runs answered every id
        ids = [str(i) for i in data["jobs"]]
        if not ids:
            raise ValueError("a submission answer with no job ids")
        return Submitted.of([replace(first, id=i, array_index=int(i.split("_")[1]) if "_" in i else None)
                             for i in ids])
    runs = tuple((int(a), int(b), int(c)) for a, b, c in data["runs"])
    count = int(data["count"])
    if count < 1 or (runs and sum((b - a) // c + 1 for a, b, c in runs) != count) or (not runs and count != 1):
        raise ValueError(f"a submission answer of {count} jobs whose runs name another number")
    note = data.get("note")
    return Submitted(str(data["group"]), count, runs, first, str(note) if note else None)


# -- the queue ----------------------------------------------------------------------------------
def queue_to_dict(view: QueueView, *, explain: bool = True) -> dict[str, Any]:
    return {
        "pending": [{"job": job_to_dict(e.job), "position": e.position, "reason": e.reason, "eta": e.eta,
                     "factors": asdict(e.factors) if explain and e.factors is not None else None}
                    for e in view.pending],
        "running": [job_to_dict(j) for j in view.running],
        "total_gpus": view.total_gpus, "free_gpus": view.free_gpus, "outside_gpus": view.outside_gpus,
        "weights": asdict(view.weights) if view.weights is not None else None,
    }


def queue_from_dict(data: dict[str, Any]) -> QueueView:
    pending = [QueueEntry(job_from_dict(e["job"]), e.get("position"), e.get("reason", ""),
                          Factors(**e["factors"]) if e.get("factors") else None, e.get("eta"))
               for e in data["pending"]]
    weights = Weights(**data["weights"]) if data.get("weights") else None
    return QueueView(pending, [job_from_dict(j) for j in data["running"]], int(data["total_gpus"]),
                     int(data["free_gpus"]), weights, int(data.get("outside_gpus", 0)))   # an older API: none


def queue_page_to_dict(view: QueueView, page: Page[QueueEntry], next_token: str | None, *, first: bool,
                       explain: bool = True, running: list[JobRecord] | None = None) -> dict[str, Any]:
    """A page of the queue (paging.py): its pending entries, each with its `rank`
    in the whole queue's order; the GPU figures and weights on every page; the
    running jobs on the first page only (null on the others), or `running`, a
    run of them, where they take more than a page; `next`."""
    shown = running if running is not None else view.running if first else []
    data = queue_to_dict(QueueView([e for _, e in page.items], shown, view.total_gpus,
                                   view.free_gpus, view.weights, view.outside_gpus), explain=explain)
    for (rank, _), entry in zip(page.items, data["pending"]):
        entry["rank"] = rank
    data.update(running=data["running"] if first or running is not None else None, next=next_token)
    return data


def queue_from_pages(pages: list[dict[str, Any]]) -> QueueView:
    """The queue the pages add up to: the first page's figures, the running jobs
    of every page that has them (the first, and those after it while they take
    more than a page), every page's pending entries put back in the queue's
    order by rank (then by seq: if the queue moved between pages, two entries
    may share a rank)."""
    ranked: list[tuple[int, int, QueueEntry]] = []
    for data in pages:
        entries = queue_from_dict({**data, "running": []}).pending
        for raw, entry in zip(data["pending"], entries):
            ranked.append((int(raw.get("rank", len(ranked))), entry.job.seq, entry))
    ranked.sort(key=lambda r: r[:2])
    first = queue_from_dict({**pages[0], "pending": [], "running": [j for p in pages for j in p["running"] or []]})
    return QueueView([entry for *_, entry in ranked], first.running, first.total_gpus, first.free_gpus,
                     first.weights, first.outside_gpus)


# -- cancel, requeue, approve, deny, hold, release, update ------------------------------------------
def results_to_dict(results: list[ControlResult]) -> dict[str, Any]:
    return {"results": [{"job": job_to_dict(r.job), "action": r.action, "detail": r.detail} for r in results]}


def step_to_dict(step: ControlStep, next_token: str | None) -> dict[str, Any]:
    """A bounded step's answer (ControlService.step), in a size that does not
    grow with an array: a job that is no array's task as results_to_dict
    has it; an array's tasks that came out alike (group, action, detail,
    state) as one entry, {"tasks": {"group", "count", "runs", "first"}}: their
    indices as runs and the first's record. `next`: the step to ask for next
    (null: done)."""
    order: list[ControlResult | tuple[str, str, str, JobState]] = []
    alike: dict[tuple[str, str, str, JobState], list[ControlResult]] = {}
    for r in step.results:
        if r.job.array_index is None:
            order.append(r)
            continue
        key = (r.job.group, r.action, r.detail, r.job.state)
        if key not in alike:
            alike[key] = []
            order.append(key)
        alike[key].append(r)
    entries = []
    for entry in order:
        if isinstance(entry, ControlResult):
            entries.append({"job": job_to_dict(entry.job), "action": entry.action, "detail": entry.detail})
            continue
        tasks = sorted(alike[entry], key=lambda r: r.job.array_index or 0)
        entries.append({"tasks": {"group": entry[0], "count": len(tasks),
                                  "runs": index_runs([r.job.array_index or 0 for r in tasks]),
                                  "first": job_to_dict(tasks[0].job)},
                        "action": entry[1], "detail": entry[2]})
    return {"results": entries, "next": next_token}


def results_from_dict(data: dict[str, Any]) -> list[ControlResult]:
    """Every job's result, those of a step's alike tasks (step_to_dict) each
    as the first's record under its own id and index."""
    results = []
    for r in data["results"]:
        if "tasks" not in r:
            results.append(ControlResult(job_from_dict(r["job"]), r["action"], r.get("detail", "")))
            continue
        tasks = r["tasks"]
        first, indices = job_from_dict(tasks["first"]), run_indices(tasks["runs"])
        if len(indices) != int(tasks["count"]):
            raise ValueError(f"{tasks['count']} tasks of array {tasks['group']} whose runs name {len(indices)}")
        results += [ControlResult(replace(first, id=f"{tasks['group']}_{i}", array_index=i), r["action"],
                                  r.get("detail", "")) for i in indices]
    return results


def step_token(action: str, position: Position | None) -> str | None:
    """The opaque `next` of a bounded step's answer: where the next step of `action` goes on."""
    if position is None:
        return None
    raw = json.dumps({"of": action, "ref": position.ref, "after": position.after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def step_position(action: str, text: str | None) -> Position | None:
    """What step_token made; None without a token, SpecError for anything else."""
    if text is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        data = None
    if (not isinstance(data, dict) or data.get("of") != action or not isinstance(data.get("ref"), int)
            or isinstance(data.get("ref"), bool) or data["ref"] < 0
            or not (data.get("after") is None or isinstance(data.get("after"), str))):
        raise SpecError(f"next {text!r} is not a token of a {action}; pass the `next` of the previous answer "
                        "as it came, or leave it out to begin")
    return Position(data["ref"], data.get("after"))


# what `POST /jobs/{ref}/update` takes: ControlService.update's keyword arguments (absent or null: unchanged)
UPDATE_KINDS: dict[str, Any] = {"time": int, "priority": str, "gpus": int}
UPDATE_FIELDS = {"time": "a whole number of seconds", "priority": "high, normal or low", "gpus": "a whole number"}


def update_to_dict(time: int | None = None, priority: str | None = None, gpus: int | None = None) -> dict[str, Any]:
    return {k: v for k, v in (("time", time), ("priority", priority), ("gpus", gpus)) if v is not None}


def update_from_dict(data: Any) -> dict[str, Any]:
    """An update request's fields, type-checked; SpecError names the first wrong one."""
    return changes_from_dict(data, UPDATE_KINDS, described=UPDATE_FIELDS)


# -- quotas and policy ------------------------------------------------------------------------------
def quota_to_dict(view: QuotaView) -> dict[str, Any]:
    return {"teams": [{"team": t.team, "policy": team_policy_to_dict(t.policy), "gpus_in_use": t.gpus_in_use,
                       "configured": t.configured, "members": list(t.members)} for t in view.teams],
            "policy": policy_to_dict(view.policy)}


def quota_from_dict(data: dict[str, Any]) -> QuotaView:
    # an API older than team members answers none: the team is shown as admins-only, as it then was
    return QuotaView([TeamQuota(t["team"], team_policy_from_dict(t["policy"]), int(t["gpus_in_use"]),
                                bool(t["configured"]), tuple(str(m) for m in t.get("members", ())))
                      for t in data["teams"]],
                     policy_from_dict(data["policy"]))


# what `PUT /quota/teams/{team}` and `PUT /quota/policy` take: QuotaService's keyword
# arguments (None or absent: unchanged; -1: no cap), with the JSON types each must have
INTS, NUMBERS = "list of integers", "list of numbers"
TEAM_CHANGES = {"share": float, "max_gpus": int, "max_gpus_per_user": int, "budget": float, "stop_at_budget": bool}
POLICY_CHANGES = {"max_gpus_per_job": int, "max_wall_time": float, "half_life": float, "fair_share_weight": float,
                  "age_weight": float, "duration_weight": float, "preempt_tiers": INTS, "approval_gpus": int,
                  "approval_gpu_hours": float, "approval_cost": float, "alert_pending_after": float,
                  "budget_alerts": NUMBERS, "idle_gpu_percent": float, "idle_gpu_window": float, "slice_tiers": INTS,
                  "slice_after": float, "slice_min_run": float, "slice_starve": float, "backfill_by": str}


def changes_to_dict(changes: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in changes.items() if v is not None}


def changes_from_dict(data: Any, allowed: dict[str, Any], *, described: dict[str, str] | None = None) -> dict[str, Any]:
    """A request's changes, type-checked against `allowed` (name -> int, float, bool, str, INTS or
    NUMBERS); SpecError names the first wrong one, in the words of `described` where it has them."""
    if not isinstance(data, dict):
        raise SpecError("the request body must be a JSON object")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise SpecError(f"unknown field(s) {', '.join(unknown)}; expected some of {', '.join(allowed)}")
    out: dict[str, Any] = {}
    for name, value in data.items():
        if value is None:
            continue
        kind = allowed[name]
        if not _of_kind(value, kind):
            words = (described or {}).get(name) or _KIND_WORDS.get(kind) or f"a {kind}"
            raise SpecError(f"{name} must be {words}" + ("" if kind in (INTS, NUMBERS) else f", got {value!r}"))
        if kind in (INTS, NUMBERS):
            out[name] = tuple(int(v) if kind == INTS else float(v) for v in value)
        else:
            out[name] = value if kind in (bool, str) else kind(value)
    return out


_KIND_WORDS: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false", str: "text"}


def _of_kind(value: Any, kind: Any) -> bool:
    if kind in (str, bool):
        return isinstance(value, kind)
    if kind in (INTS, NUMBERS):
        return isinstance(value, list) and all(_number(v, int if kind == INTS else float) for v in value)
    return _number(value, kind)


def _number(value: Any, kind: type) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return kind is not int or value == int(value)


# -- cost --------------------------------------------------------------------------------------------
def cost_to_dict(report: CostReport) -> dict[str, Any]:
    return {"period": report.period, "current": report.current,
            "teams": [{"team": t.team, "settled": t.settled, "running": t.running, "budget": t.budget}
                      for t in report.teams],
            "gpu_hours": report.gpu_hours, "jobs": [asdict(j) for j in report.jobs]}


def cost_jobs(text: str | None) -> int:
    """GET /cost's `jobs`: how many of the costliest jobs to list (absent: none)."""
    if text is None:
        return 0
    if not text.isdigit():
        raise SpecError(f"jobs must be a whole number, got {text!r}")
    return int(text)


def cost_from_dict(data: dict[str, Any]) -> CostReport:
    # gpu_hours and jobs are absent from an older API's answer: none asked for, none shown
    return CostReport(str(data["period"]), bool(data["current"]),
                      [TeamCost(str(t["team"]), float(t["settled"]), float(t["running"]),
                                None if t.get("budget") is None else float(t["budget"])) for t in data["teams"]],
                      {str(k): float(v) for k, v in (data.get("gpu_hours") or {}).items()},
                      [JobCost(str(j["id"]), str(j["name"]), str(j["team"]), str(j["owner"]), str(j["status"]),
                               int(j["gpus"]), float(j["gpu_hours"]), float(j["cost"]),
                               None if j.get("gpu_util") is None else float(j["gpu_util"]))
                       for j in data.get("jobs") or []])


# -- the overview (gqa top, gqa ui) ------------------------------------------------------------------
OVERVIEW_MOST = 200    # pending jobs, and events, an overview may be asked to carry


def overview_sizes(head: int | None, events: int | None) -> tuple[int, int]:
    """GET /overview's `head` and `events` (absent: the service's defaults); SpecError past OVERVIEW_MOST."""
    sizes = (HEAD if head is None else head, EVENTS if events is None else events)
    for name, size in zip(("head", "events"), sizes):
        if size > OVERVIEW_MOST:
            raise SpecError(f"{name} must be at most {OVERVIEW_MOST}, got {size}")
    return sizes


def overview_to_dict(view: Overview) -> dict[str, Any]:
    """GET /overview's answer: the Overview's fields as they are, a state by its value."""
    data = asdict(view)
    data["events"] = [{**asdict(e), "state": e.state.value} for e in view.events]
    return data


def overview_from_dict(data: dict[str, Any]) -> Overview:
    def running(r: dict[str, Any] | None) -> RunningJob | None:
        return None if r is None else RunningJob(**{**r, "gpus": tuple(r["gpus"])})

    return Overview(
        float(data["at"]), str(data["period"]),
        [GpuSlot(int(g["index"]), str(g["type"]), bool(g["spot"]), running(g["job"])) for g in data["gpus"]],
        [RunningJob(**{**r, "gpus": tuple(r["gpus"])}) for r in data["running"]], int(data["pending"]),
        [HeadEntry(**e) for e in data["head"]], [TeamLoad(**t) for t in data["teams"]],
        [JobEvent(**{**e, "state": JobState(e["state"])}) for e in data["events"]])


# -- history -----------------------------------------------------------------------------------------
_SUMMARY_FIELDS = {f.name for f in fields(JobSummary)}


def history_query_to_params(query: HistoryQuery, token: str | None) -> dict[str, Any]:
    """GET /history's query: the window as epoch seconds, states by their value, comma-separated;
    `waiting=1` for the jobs not started yet too (an API older than it lists them not)."""
    states = ",".join(sorted(s.value for s in query.states)) if query.states is not None else None
    return {"since": repr(query.since), "until": None if query.until is None else repr(query.until),
            "owner": query.owner, "team": query.team, "state": states, "group": query.group, "name": query.name,
            "limit": query.limit, "next": token, "waiting": "1" if query.waiting else None}


def history_query_from_params(get: Any) -> tuple[HistoryQuery, str | None]:
    """The query and page token from `get(name) -> str | None`; SpecError, naming the parameter, for a bad one."""
    def number(name: str) -> float | None:
        text = get(name)
        if text is None:
            return None
        try:
            return float(text)
        except ValueError:
            raise SpecError(f"{name} must be a time in epoch seconds, got {text!r}") from None

    since = number("since")
    if since is None:
        raise SpecError("since is required: the start of the window, in epoch seconds")
    states = None
    if get("state") is not None:
        try:
            states = frozenset(JobState(s.strip().upper()) for s in get("state").split(",") if s.strip())
        except ValueError:
            raise SpecError(f"state must be job states (SUCCEEDED, FAILED, ...), got {get('state')!r}") from None
    limit_text = get("limit")
    if limit_text is not None and not limit_text.isdigit():
        raise SpecError(f"limit must be a whole number, got {limit_text!r}")
    waiting = get("waiting")
    if waiting not in (None, "0", "1"):
        raise SpecError(f"waiting must be 1 (the jobs not started yet too) or 0, got {waiting!r}")
    query = HistoryQuery(since=since, until=number("until"), owner=get("owner"), team=get("team"), states=states,
                         group=get("group"), name=get("name"), waiting=waiting == "1",
                         **({"limit": int(limit_text)} if limit_text is not None else {}))
    return query, get("next")


def summary_to_dict(row: JobSummary) -> dict[str, Any]:
    data = asdict(row)
    data["state"] = row.state.value
    data["waited"] = [list(w) for w in row.waited]
    data["runs"] = [list(r) for r in row.runs]
    return data


def summary_from_dict(data: dict[str, Any]) -> JobSummary:
    values = {k: v for k, v in data.items() if k in _SUMMARY_FIELDS}   # newer fields: ignored
    values["state"] = JobState(data["state"])
    values["waited"] = tuple((str(why), float(seconds)) for why, seconds in data.get("waited") or ())
    values["runs"] = tuple((float(start), float(end)) for start, end in data.get("runs") or ())
    return JobSummary(**values)


def history_to_dict(page: HistoryPage) -> dict[str, Any]:
    return {"jobs": [summary_to_dict(r) for r in page.rows], "next": page.next}


def history_from_dict(data: dict[str, Any]) -> HistoryPage:
    token = data.get("next")
    if token is not None and not isinstance(token, str):
        raise TypeError(f"next must be a string or null, got {token!r}")
    return HistoryPage([summary_from_dict(r) for r in data["jobs"]], token)


# -- triggers ----------------------------------------------------------------------------------------
def trigger_to_dict(trigger: Trigger, *, with_env: bool) -> dict[str, Any]:
    """Trigger.to_dict, the job's env left out unless `with_env`, the owner's ARN always."""
    data = trigger.to_dict()
    del data["owner_arn"]
    if not with_env:
        spec = json.loads(trigger.spec_json)
        if isinstance(spec, dict) and spec.pop("env", None):
            data["spec_json"] = json.dumps(spec, separators=(",", ":"))
    return data


def triggers_from_dict(data: dict[str, Any]) -> list[Trigger]:
    """SpecError (a malformed trigger) is the caller's to turn into BackendUnavailable."""
    return [Trigger.from_dict(t) for t in data["triggers"]]


# -- the caller --------------------------------------------------------------------------------------
def principal_to_dict(principal: Principal) -> dict[str, Any]:
    return {"owner": principal.owner, "arn": principal.arn, "account": principal.account,
            "roles": roles_text(principal)}
