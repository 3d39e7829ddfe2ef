"""GET /jobs/<array> and GET /queue stay under Lambda's 6 MB answer whatever
the tasks' histories hold (time slicing and spot reclaims make 20 attempts
common): a page ends early at paging.ANSWER_BYTES, its `next` naming the
rest, and the pages add up to every task once, in the same records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

from gqa.http import paging, wire
from gqa.models.job import JobRecord, JobState, Transition
from gqa.scheduling.snapshot import Factors, Weights
from gqa.services.queries import QueryService, QueueEntry, QueueView
from lambdas.api import listings
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.test_api_handler import CONTEXT, api  # noqa: F401  (the fixture)
from tests.builders import job_record

pytestmark = pytest.mark.aws
S = JobState
LAMBDA_ANSWER = 6 * 1024 * 1024        # what a Lambda may answer API Gateway, the whole envelope counted
RECLAIM = ("its instance was reclaimed (Host EC2 (instance i-0abc123def4567890) terminated.); not counted as an "
           "error, resumes from its last checkpoint in 8s")


def task(index: int, attempts: int, state: JobState = S.QUEUED) -> JobRecord:
    """A task of array 12 reclaimed `attempts` times, each attempt's four moves in its history."""
    moves = [Transition(S.SUBMITTED, 0, "accepted"), Transition(S.QUEUED, 1, "admitted")]
    for a in range(1, attempts + 1):
        moves += [Transition(S.STARTING, 10 * a, "assigned GPUs 3"),
                  Transition(S.RUNNING, 10 * a + 1, f"attempt {a} started"),
                  Transition(S.RETRY_WAIT, 10 * a + 5, RECLAIM), Transition(S.QUEUED, 10 * a + 8, "back in the queue")]
    return job_record(id=f"12_{index}", group="12", array_index=index, seq=index + 1, history=tuple(moves),
                      name="sweep-lr-3e-4", attempts=attempts, state=state)


@pytest.fixture
def kept() -> Iterator[None]:
    listings.groups.clear()
    listings.queues.clear()
    yield
    listings.groups.clear()
    listings.queues.clear()


def read_all(api, path: str, **query: str) -> list[dict[str, Any]]:  # noqa: F811
    """Every page, following `next` as the CLI does, each answer checked against Lambda's limit."""
    pages: list[dict[str, Any]] = []
    token = None
    while True:
        event = rest_event("GET", path, arn=user_arn("bob"), query={**query, **({"next": token} if token else {})})
        answer = api.module.handler(event, CONTEXT)
        assert answer["statusCode"] == 200, answer["body"][:300]
        assert len(json.dumps(answer)) < LAMBDA_ANSWER
        page = json.loads(answer["body"])
        assert paging.encoded_bytes(page) <= paging.ANSWER_BYTES
        pages.append(page)
        token = page["next"]
        if token is None:
            return pages


@pytest.mark.parametrize("attempts", [1, 20])
def test_an_arrays_pages_stay_within_the_answer_and_hold_every_task_once(api, kept, attempts):  # noqa: F811
    tasks = [task(i, attempts) for i in range(1000)]
    with mock.patch.object(QueryService, "jobs", autospec=True, return_value=tasks):
        pages = read_all(api, "/jobs/12")
    assert len(pages) == (1 if attempts == 1 else 2)       # 1.3 MB, or 8.6 MB in two pages
    assert wire.jobs_from_pages(pages) == [wire.job_from_dict(wire.job_to_dict(t)) for t in tasks]


def test_the_queues_pages_stay_within_the_answer_beside_the_running_jobs(api, kept):  # noqa: F811
    pending = [QueueEntry(task(i, 20), i + 1, "waits for 4 a10g GPUs", Factors(0.5, 0.2, 0.1, 0.3), 100.0 + i)
               for i in range(1000)]
    running = [task(1000 + i, 20, S.RUNNING) for i in range(200)]          # 1.6 MB on the first page
    view = QueueView(pending, running, 256, 0, Weights(2.0, 0.5, 0.1))
    with mock.patch.object(QueryService, "queue", autospec=True, return_value=view):
        pages = read_all(api, "/queue")
    assert len(pages) == 3 and len(pages[0]["pending"]) < len(pages[1]["pending"])
    read = wire.queue_from_pages(pages)
    assert [e.job.id for e in read.pending] == [e.job.id for e in pending]
    assert [e.position for e in read.pending] == list(range(1, 1001))
    assert len(read.running) == 200 and all(p["running"] is None for p in pages[1:])


def test_several_hundred_long_running_jobs_take_the_pages_they_need_before_the_pending(api, kept):  # noqa: F811
    pending = [QueueEntry(task(i, 20), i + 1, "waits for 4 a10g GPUs", Factors(0.5, 0.2, 0.1, 0.3), 100.0 + i)
               for i in range(1000)]
    running = [task(1000 + i, 20, S.RUNNING) for i in range(700)]          # 5.6 MB of running jobs alone
    view = QueueView(pending, running, 1024, 0, Weights(2.0, 0.5, 0.1))
    with mock.patch.object(QueryService, "queue", autospec=True, return_value=view):
        pages = read_all(api, "/queue")
    assert pages[0]["pending"] == [] and pages[0]["running"] and pages[1]["running"]
    read = wire.queue_from_pages(pages)
    assert [j.id for j in read.running] == [j.id for j in running]           # each once, in order
    assert read.running == [wire.job_from_dict(wire.job_to_dict(j)) for j in running]
    assert [e.job.id for e in read.pending] == [e.job.id for e in pending]
    assert [e.position for e in read.pending] == list(range(1, 1001))
