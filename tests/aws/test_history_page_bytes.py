"""GET /history stays under Lambda's 6 MB answer whatever the jobs' attempts:
a summary holds each attempt's run, about 40 bytes, so 1,000 jobs of 150
attempts take 6.7 MB. A page ends at paging.ANSWER_BYTES, and its `next` is
the store's token after the last row it holds: the pages add up to every job
once, in order, also where a page stops inside what one store query read."""

from __future__ import annotations

import json
import time
from typing import Any
from unittest import mock

import pytest

from gqa.adapters.aws import items as it
from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.http import paging, wire
from gqa.models.job import JobRecord, JobState, Transition
from gqa.ports import HistoryQuery
from lambdas.api import history as route
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.aws_limits import LAMBDA_ANSWER_BYTES, lambda_answer
from tests.aws.test_api_handler import CONTEXT, NAMES, api  # noqa: F401  (the fixture)
from tests.builders import job_record

pytestmark = pytest.mark.aws
S = JobState
NOW = time.time()
SINCE = NOW - 30 * 86_400


def reclaimed(n: int, attempts: int, *, ended: float | None = None) -> JobRecord:
    """Job n+1, reclaimed `attempts` times and then finished (at `ended`), or running its last attempt."""
    t0 = NOW - 5 * 86_400 + n * 37.123456
    moves = [Transition(S.SUBMITTED, t0, "accepted"), Transition(S.QUEUED, t0 + 1.5, "admitted")]
    at = t0 + 10
    for a in range(1, attempts + 1):
        moves += [Transition(S.STARTING, at, "assigned GPUs 0"), Transition(S.RUNNING, at + 1.25, f"attempt {a}"),
                  Transition(S.RETRY_WAIT, at + 50.5, "its instance was reclaimed"),
                  Transition(S.QUEUED, at + 60.25, "back in the queue")]
        at += 100.37
    moves += [Transition(S.STARTING, at, "assigned GPUs 0"), Transition(S.RUNNING, at + 1.25, "last attempt")]
    if ended is None:
        return job_record(id=str(n + 1), group=str(n + 1), seq=n + 1, history=tuple(moves), state=S.RUNNING,
                          attempts=attempts + 1, submitted_at=t0, started_at=at + 1.25, reclaims=attempts)
    return job_record(id=str(n + 1), group=str(n + 1), seq=n + 1, state=S.SUCCEEDED, attempts=attempts + 1,
                      history=(*moves, Transition(S.SUCCEEDED, ended, "exit 0")), submitted_at=t0,
                      started_at=at + 1.25, ended_at=ended, exit_code=0, reclaims=attempts)


def read_all(api, **query: str) -> tuple[list[dict[str, Any]], list[int]]:  # noqa: F811
    """Every page, following `next` as the CLI does, each answer as API Gateway passes it on."""
    pages: list[dict[str, Any]] = []
    sizes: list[int] = []
    token = None
    while True:
        event = rest_event("GET", "/history", arn=user_arn("bob"),
                           query={"since": repr(SINCE), **query, **({"next": token} if token else {})})
        answer = api.module.handler(event, CONTEXT)
        sizes.append(len(json.dumps(answer).encode()))
        answer = lambda_answer(answer)
        assert answer["statusCode"] == 200, answer["body"][:300]
        page = json.loads(answer["body"])
        assert paging.encoded_bytes(page) <= paging.ANSWER_BYTES
        pages.append(page)
        token = page["next"]
        if token is None:
            return pages, sizes


class Listing:
    """A store's history over fixed jobs (newest end first), its token the position after a page."""

    def __init__(self, jobs: list[JobRecord]):
        self.jobs, self.reads = jobs, 0

    def history(self, query: HistoryQuery, after: str | None = None) -> tuple[list[JobRecord], str | None]:
        self.reads += 1
        start = 0 if after is None else int(after)
        page = self.jobs[start:start + query.limit]
        return page, str(start + len(page)) if start + len(page) < len(self.jobs) else None


def test_a_thousand_jobs_of_150_attempts_come_in_pages_under_lambdas_answer(api):  # noqa: F811
    jobs = [reclaimed(n, 150, ended=NOW - 60 - n) for n in range(1000)]
    listing = Listing(jobs)
    with mock.patch.object(DynamoDBStore, "history", autospec=True,
                           side_effect=lambda _, query, after=None: listing.history(query, after)):
        pages, sizes = read_all(api, limit="1000")   # as the CLI asks (History.rows)
    assert max(sizes) < LAMBDA_ANSWER_BYTES and len(pages) == 2     # 6.8 MB of summaries
    assert [row["id"] for page in pages for row in page["jobs"]] == [j.id for j in jobs]
    assert listing.reads == 3    # the first page, asked again with the limit that fits; the rest


def test_pages_cut_by_bytes_resume_exactly_where_they_stopped_on_dynamodb(api, monkeypatch):  # noqa: F811
    """Running jobs, then finished ones with ties on their end: each page holds a few rows of what one
    store query read, and the pages hold every job once, in the order of one whole page."""
    running = [reclaimed(n, 20) for n in range(3)]
    finished = [reclaimed(n, 20, ended=NOW - 3_600 - (n // 3) * 60) for n in range(3, 14)]   # ends in threes
    for job in running + finished:   # each history in its one item, as the summaries read it
        api.store.client.put_item(TableName=NAMES.jobs, Item=it.dump(it.job_item(job, 1)))
    whole = [row for page in read_all(api, limit="1000")[0] for row in page["jobs"]]
    assert len(whole) == 14
    row = max(paging.encoded_bytes(r) for r in whole)
    monkeypatch.setattr(route, "BUDGET", 3 * row + 10, raising=False)     # three rows a page
    pages, _ = read_all(api, limit="1000")
    assert all(paging.encoded_bytes(p["jobs"]) <= route.BUDGET for p in pages)
    assert [len(p["jobs"]) for p in pages if p["jobs"]] == [3] * 4 + [2]
    assert [r["id"] for p in pages for r in p["jobs"]] == [r["id"] for r in whole]
    assert [wire.summary_from_dict(r).state for p in pages for r in p["jobs"]][:3] == [S.RUNNING] * 3
