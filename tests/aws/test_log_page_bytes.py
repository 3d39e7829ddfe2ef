"""GET /jobs/{id}/logs stays under Lambda's 6 MB answer whatever the output
holds: escaped as it travels, a control character takes 7 bytes, a non-ASCII
one 7 or 14, so 10,000 lines may be tens of MB. A page ends at
paging.ANSWER_BYTES and its token resumes after its last line, within what
one GetLogEvents call answered: read to the end, and followed as the job
writes more, every line comes once, in order. Through the api function on
moto, its job started on moto's Batch by the dispatch function."""

from __future__ import annotations

import json
import time

import pytest

from gqa.adapters.aws.batch_logs import DEFAULT_GROUP
from gqa.http import paging
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.aws_limits import lambda_answer
from tests.aws.fake_batch import API_CONTEXT, CONTEXT, WAKEUP_EVENT, FakeBatch, deployment
from tests.builders import spec

pytestmark = pytest.mark.aws

# 1,000 characters a line that travel as 6,000 to 14,000 bytes: control characters, accents, emoji, quotes
HEAVY = ["\x01\x1b[0m" * 250, "é" * 1000, "\U0001F525" * 500 + '"\\' * 250, "naïve \t\"quoted\"\r " * 50]


def heavy(n: int) -> str:
    return f"{n:05d} " + HEAVY[n % len(HEAVY)]


@pytest.fixture
def world():
    with deployment(time.time()) as world:
        batch = FakeBatch(world.dispatch.container().compute.client)
        world.send(spec(resources={"gpus": 1}, command=["python", "train.py"]))
        assert world.admit.handler({"Records": world.receive()}, CONTEXT) == {"batchItemFailures": []}
        world.dispatch.handler(WAKEUP_EVENT, CONTEXT)
        [submitted] = batch.take_new()
        now = world.clock.now()
        world.reconcile.handler(FakeBatch.event(submitted, "RUNNING", at=now, started=now), CONTEXT)
        [described] = world.client("batch").describe_jobs(jobs=[submitted.batch_job_id])["jobs"]
        world.stream = described["container"]["logStreamName"]
        world.client("logs").create_log_stream(logGroupName=DEFAULT_GROUP, logStreamName=world.stream)
        world.job_id = submitted.job_id
        world.written = int(time.time() * 1000)     # each line a millisecond after the one before
        yield world


def write(world, lines: list[str]) -> None:
    """What the awslogs driver does: one event per line, in order, at most 10,000 a call."""
    logs, first = world.client("logs"), world.written
    world.written += len(lines)
    for start in range(0, len(lines), 10_000):
        logs.put_log_events(logGroupName=DEFAULT_GROUP, logStreamName=world.stream,
                            logEvents=[{"timestamp": first + start + i, "message": line}
                                       for i, line in enumerate(lines[start:start + 10_000])])


def page(world, token: str | None = None, limit: int = 10_000) -> dict:
    query = {"limit": str(limit), **({"token": token} if token else {})}
    answer = lambda_answer(world.api.handler(rest_event("GET", f"/jobs/{world.job_id}/logs", arn=user_arn("alice"),
                                                        query=query), API_CONTEXT))
    assert answer["statusCode"] == 200, answer["body"][:300]
    body = json.loads(answer["body"])
    assert paging.encoded_bytes(body) <= paging.ANSWER_BYTES
    return body


def follow(world, token: str | None = None) -> tuple[list[str], str, int]:
    """Pages until one ends with nothing more for now: its lines, the last token, how many pages."""
    lines: list[str] = []
    pages = 0
    while True:
        body = page(world, token)
        pages += 1
        lines += body["lines"]
        if body["token"] == token and not body["lines"]:
            return lines, token, pages
        token = body["token"]


def test_escaped_output_comes_in_pages_under_the_answer_each_line_once_and_followed(world):
    written = [heavy(n) for n in range(2500)]          # 4.2 MB of UTF-8, 13.7 MB as it travels
    write(world, written)

    lines, token, pages = follow(world)

    assert lines[0].startswith(f"--- gqa: attempt 1 of job {world.job_id} on Batch job ")
    assert lines[1:] == written                            # every line once, in order, none cut
    travels = sum(paging.encoded_bytes(line) + 1 for line in written)
    assert pages - 1 == travels // paging.ANSWER_BYTES + 1  # as few pages as hold it, and the last, empty

    more = [heavy(n) for n in range(2500, 4000)]       # the job writes on: `gqa logs -f` goes on from there
    write(world, more)
    lines, _, _ = follow(world, token)
    assert lines == more
