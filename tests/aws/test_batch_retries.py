"""Who retries which Batch call, over real HTTP: the dispatch function's Batch
client against a local endpoint that fails the way Batch can (a 500 after it
created the job, a connection closed before its answer). SubmitJob is tried
once, whatever botocore would do, since Batch takes no client token and a
second try is a second Batch job; the reads and TerminateJob, safe to repeat,
are still retried (batch_compute.CLIENT_CONFIG, errors.Retrying)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from unittest import mock

import pytest

from gqa.models.errors import LaunchUncertain
from gqa.models.job import JobState
from tests.aws.fake_batch import deployment
from tests.builders import job_record

pytestmark = pytest.mark.aws
Answer = Callable[[BaseHTTPRequestHandler, dict[str, Any]], None]


def server_error(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    """Batch failed on its side (after creating the job, for all the caller can tell)."""
    handler.send_response(500)
    handler.send_header("x-amzn-ErrorType", "ServerException")
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    handler.wfile.write(b'{"__type": "ServerException", "message": "internal"}')


def closed(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    """The request arrived, its answer never did."""
    handler.close_connection = True


def answered(handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
    path = handler.path.rstrip("/").rsplit("/", 1)[-1]
    out: dict[str, Any] = {
        "submitjob": {"jobId": "b-1", "jobName": body.get("jobName", ""), "jobArn": "arn:aws:batch:::job/b-1"},
        "describejobs": {"jobs": [{"jobId": j, "jobName": "gqa-7-1-train", "status": "RUNNING",
                                   "jobQueue": "q", "startedAt": 1, "createdAt": 1,
                                   "jobDefinition": "d", "container": {}} for j in body.get("jobs", [])]},
    }.get(path, {})
    data = json.dumps(out).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class Endpoint:
    """A Batch endpoint on localhost: each request's path is recorded and answered by the next of
    `first` for its operation, then as Batch answers it when all is well."""

    def __init__(self, first: dict[str, list[Answer]]):
        self.calls: list[str] = []
        todo = {op: list(answers) for op, answers in first.items()}
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                operation = self.path.rstrip("/").rsplit("/", 1)[-1]
                calls.append(operation)
                answers = todo.get(operation)
                (answers.pop(0) if answers else answered)(self, body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> "Endpoint":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def batch_at() -> Iterator[Callable[[Endpoint], Any]]:
    """The dispatch function's BatchCompute, as its cold start wires it, with Batch at an Endpoint."""
    with deployment(1_000_000.0) as world:
        def wired(endpoint: Endpoint) -> Any:
            with mock.patch.dict(os.environ, {"AWS_ENDPOINT_URL_BATCH": endpoint.url}):
                return world.dispatch.build().compute
        yield wired


def starting(**fields: Any) -> Any:
    return job_record(id="7", gpus=1, state=JobState.STARTING, assigned=(0,), attempts=1, **fields)


@pytest.mark.parametrize("failure", [server_error, closed], ids=["a 500", "no answer"])
def test_a_submit_batch_may_have_taken_is_sent_once_and_uncertain(batch_at, failure):
    with Endpoint({"submitjob": [failure]}) as batch:
        with pytest.raises(LaunchUncertain):
            batch_at(batch).launch(starting(), (0,), 1)
    # one SubmitJob: the attempt waits for find(), never a second Batch job beside the first
    assert batch.calls == ["submitjob"]


def test_reads_are_still_retried_after_a_500_or_no_answer(batch_at):
    with Endpoint({"describejobs": [server_error, closed]}) as batch:
        assert batch_at(batch).alive(starting(proc_token="b-1"))
    assert batch.calls == ["describejobs"] * 3
