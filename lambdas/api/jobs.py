"""The job routes: who is calling, submit, status, the queue, and the
changes a caller asks for (cancel, requeue, hold, release, update, approve, deny)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from gqa.http import paging, wire
from gqa.models.errors import SpecError
from gqa.models.loader import validate
from gqa.services.access import Action, authorize
from gqa.models.job import JobRecord
from gqa.services.queries import QueueEntry
from lambdas.api import listings
from lambdas.api.container import container, logger
from lambdas.api.request import app, body, caller, flag, jobs_named, number, query, refs_of

GATEWAY_SECONDS = 29.0   # API Gateway's integration timeout: an answer later than this is a 504


@app.get("/whoami")
def whoami() -> dict[str, Any]:
    return wire.principal_to_dict(caller())


@app.post("/jobs")
def submit() -> Response:
    who = caller()
    raw, environment = wire.submission_from_dict(body())
    spec = validate(raw, source="request")
    authorize(who, Action.SUBMIT)
    jobs = container().submitter().accept(spec, owner=who.owner, environment=environment, caller=who)
    if jobs:
        logger.set_correlation_id(jobs[0].group)
    logger.info("accepted", extra={"job_ids": f"{jobs[0].id}..{jobs[-1].id} ({len(jobs)})" if len(jobs) > 1
                                   else [j.id for j in jobs]})
    return Response(202, content_types.APPLICATION_JSON, json.dumps(wire.submitted_to_dict(jobs)))


@app.get("/jobs/<ref>")
def status(ref: str) -> dict[str, Any]:
    authorize(caller(), Action.READ)
    logger.set_correlation_id(ref)
    limit, after = paging.check_limit(number("limit")), paging.after_of("jobs", query("next"))
    history = flag("history", True)     # false: without transitions (gqa wait's polls)
    # the group is read once for all its pages (listings.py); how many are still being admitted, each page
    view_id, jobs = listings.groups.get((ref, history), paging.view_of(query("next")),
                                        lambda: container().queries().jobs(ref, history=history))
    admitting = container().queries().admitting(ref)
    # as many as the answer holds: a task's history grows with its attempts
    page = paging.page_of(jobs, lambda j: j.seq, limit=limit, after=after,
                          size=lambda j: paging.encoded_bytes(wire.job_to_dict(j)),
                          budget=paging.ANSWER_BYTES - paging.encoded_bytes(
                              wire.jobs_page_to_dict(paging.Page([], None), view_id, admitting)))
    return wire.jobs_page_to_dict(page, paging.token("jobs", page.next, view_id), admitting)


@app.get("/queue")
def queue() -> dict[str, Any]:
    authorize(caller(), Action.READ)
    explain = flag("explain", True)
    limit, (after, running_after) = paging.check_limit(number("limit")), paging.position_of("queue", query("next"))
    group = query("group")
    view_id, view = listings.queues.get(group, paging.view_of(query("next")),
                                        lambda: container().queries().queue(group=group))

    def answer(entries: list[tuple[int, QueueEntry]], next_token: str | None,
               running: list[JobRecord] | None) -> dict[str, Any]:   # running None: none, and null
        return wire.queue_page_to_dict(view, paging.Page(entries, None), next_token, first=False, explain=explain,
                                       running=running)

    running: list[JobRecord] | None = None
    if query("next") is None or running_after is not None:
        # the running jobs first, unpaged by `limit` but as many as the answer holds: several hundred
        # with long records may take more than one; the pending then go on from the page that ends them
        taken = paging.page_of(view.running, lambda j: j.seq, limit=len(view.running) + 1, after=running_after,
                               size=lambda j: paging.encoded_bytes(wire.job_to_dict(j)),
                               budget=paging.ANSWER_BYTES - paging.encoded_bytes(answer([], view_id, [])))
        running = [job for _, job in taken.items]
        if taken.next is not None:
            return answer([], paging.token("queue", None, view_id, running=taken.next), running)

    def size(entry: QueueEntry) -> int:   # as the page writes it, with a rank as long as any
        return paging.encoded_bytes(answer([(len(view.pending), entry)], None, None)["pending"][0])

    # as many as the answer holds beside the rest of the page (the running jobs it ends with among it)
    page = paging.page_of(view.pending, lambda e: e.job.seq, limit=limit, after=after, size=size,
                          budget=paging.ANSWER_BYTES - paging.encoded_bytes(answer([], view_id, running)))
    return answer(page.items, paging.token("queue", page.next, view_id), running)


@app.post("/jobs/<refs>/cancel")
def cancel(refs: str) -> dict[str, Any]:
    return _step("cancel", Action.CANCEL, refs)


@app.post("/jobs/<refs>/requeue")
def requeue(refs: str) -> dict[str, Any]:
    return _step("requeue", Action.REQUEUE, refs)


@app.post("/jobs/<refs>/hold")
def hold(refs: str) -> dict[str, Any]:
    return _step("hold", Action.HOLD, refs, by_caller=True)


@app.post("/jobs/<refs>/release")
def release(refs: str) -> dict[str, Any]:
    return _step("release", Action.RELEASE, refs, by_caller=True)


@app.post("/jobs/<ref>/update")
def update(ref: str) -> dict[str, Any]:
    who, changes = caller(), wire.update_from_dict(body())
    logger.set_correlation_id(ref)
    authorize(who, Action.UPDATE, jobs_named([ref]))
    return _done("update", container().control().update(ref, **changes))


@app.post("/jobs/<refs>/approve")
def approve(refs: str) -> dict[str, Any]:
    who, named = caller(), refs_of(refs)
    authorize(who, Action.APPROVE)
    return _done("approve", container().control().approve(named, caller=who.owner))


@app.post("/jobs/<refs>/deny")
def deny(refs: str) -> dict[str, Any]:
    who, named = caller(), refs_of(refs)
    authorize(who, Action.DENY)
    request = body()
    reason = request.get("reason", "") if isinstance(request, dict) else None
    if not isinstance(reason, str):
        raise SpecError('the request body must be {"reason": "..."} or empty')
    return _done("deny", container().control().deny(named, caller=who.owner, reason=reason))


def _step(verb: str, action: Action, refs: str, *, by_caller: bool = False) -> dict[str, Any]:
    """A bounded step of the change (ControlService.step): as much as half the
    time left holds (of API Gateway's 29 s, or of the function's where less:
    the rest is for reads, retries under throttling and the answer), its
    tasks summarised (wire.step_to_dict); the caller asks again with `next`."""
    who, named = caller(), refs_of(refs)
    after = wire.step_position(verb, query("next"))
    wiring = container()
    seconds = min(app.lambda_context.get_remaining_time_in_millis() / 1000, GATEWAY_SECONDS) / 2
    step = wiring.control().step(verb, named, wiring.store, until=wiring.clock.now() + seconds, after=after,
                                 allow=lambda jobs: authorize(who, action, jobs),
                                 caller=who.owner if by_caller else None)
    token = wire.step_token(verb, step.next)
    logger.info(verb, extra={"results": dict(Counter(r.action for r in step.results)), "more": token is not None,
                             "jobs": f"{step.results[0].job.id}..{step.results[-1].job.id}" if step.results else ""})
    return wire.step_to_dict(step, token)


def _done(verb: str, results) -> dict[str, Any]:
    logger.info(verb, extra={"results": {r.job.id: r.action for r in results}})
    return wire.results_to_dict(results)
