"""A job's output on AWS (moto): attempts launched by BatchCompute, found
again by the record's Batch job id or by name with ListJobs, their streams
from DescribeJobs (moto fills container.logStreamName as Batch does, but runs
no container, so each test writes the stream itself), and CloudWatch Logs
read from the head and resumed from nextForwardToken. Answers moto cannot
give (a job definition's log group, another log driver) are written in the
shape AWS documents."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.batch_compute import BatchCompute
from gqa.adapters.aws.batch_logs import DEFAULT_GROUP, BatchLogs
from gqa.adapters.aws.resources import Pool
from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.models.errors import BackendUnavailable, NotFound, SpecError
from gqa.models.job import JobState
from gqa.services.logs import LogService
from tests.aws.moto_support import FakeClock, answer, capture, create_batch, refuse, session
from tests.builders import job_record
from tests.contract.conftest import FAKE_AWS
from tests.services.fakes import FakeRecords

pytestmark = pytest.mark.aws
POOLS = (Pool("a10g", spot=True, max_gpus=4, price=0.5), Pool("a10g", spot=False, max_gpus=4, price=1.2))
SPOT, ON_DEMAND = (0,), (4,)      # a GPU slot of each pool


@pytest.fixture
def aws():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws(config={"batch": {"use_docker": False}}):
        create_batch(session(), POOLS)
        s3 = session().client("s3")
        s3.create_bucket(Bucket="ckpt")
        logs = session().client("logs")
        logs.create_log_group(logGroupName=DEFAULT_GROUP)
        compute = BatchCompute(session().client("batch"), POOLS, "gqa-train", S3Checkpoints(s3, "ckpt"), FakeClock())
        yield compute, logs


@pytest.fixture
def batch_logs(aws) -> BatchLogs:
    compute, logs = aws
    sleeps: list[float] = []
    made = BatchLogs(compute.client, logs, POOLS, sleep=sleeps.append, attempts=3)
    made.sleeps = sleeps  # type: ignore[attr-defined]
    return made


def launch(compute: BatchCompute, record, gpus, attempt: int):
    """Attempt `attempt` of the job on Batch, and the record as the services then keep it."""
    token = compute.launch(record, gpus, attempt).token
    return replace(record, attempts=attempt, proc_token=token)


def stream_of(compute: BatchCompute, batch_id: str) -> str:
    [described] = compute.client.describe_jobs(jobs=[batch_id])["jobs"]
    return described["container"]["logStreamName"]


def write(logs, stream: str, *lines: str, group: str = DEFAULT_GROUP) -> None:
    """What the awslogs driver does for a container: one event per line."""
    if not logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=stream)["logStreams"]:
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
    now = int(time.time() * 1000)
    logs.put_log_events(logGroupName=group, logStreamName=stream,
                        logEvents=[{"timestamp": now + i, "message": line} for i, line in enumerate(lines)])


def two_attempts(compute: BatchCompute):
    """Job 12: attempt 1 on spot (reclaimed), attempt 2 on demand; and job 1's
    attempt 2, whose name (gqa-1-2-...) must not be taken for job 12's."""
    record = job_record(id="12", group="12", state=JobState.RUNNING)
    first = launch(compute, record, SPOT, 1)
    second = launch(compute, first, ON_DEMAND, 2)
    launch(compute, job_record(id="1", group="1"), SPOT, 2)
    return first, second


# -- finding an attempt's stream ------------------------------------------------------------------------

def test_the_current_attempt_is_described_by_its_recorded_batch_id_alone(aws, batch_logs):
    compute, _ = aws
    _, job = two_attempts(compute)
    calls = capture(compute.client)
    where = batch_logs.attempt(job, 2)
    assert [c["_operation"] for c in calls] == ["DescribeJobs"]
    assert (where.attempt, where.source, where.status) == (2, f"Batch job {job.proc_token}", "SUCCEEDED")
    assert (where.group, where.stream) == (DEFAULT_GROUP, stream_of(compute, job.proc_token))
    assert where.started_at is not None and abs(where.started_at - time.time()) < 60


def test_an_earlier_attempt_is_found_by_name_on_every_pool_queue(aws, batch_logs):
    compute, _ = aws
    first, job = two_attempts(compute)
    calls = capture(compute.client, "ListJobs")
    where = batch_logs.attempt(job, 1)
    assert where.source == f"Batch job {first.proc_token}"
    assert where.stream == stream_of(compute, first.proc_token)
    assert {c["jobQueue"] for c in calls} == {"gqa-a10g-spot", "gqa-a10g-ondemand"}
    assert all(c["filters"] == [{"name": "JOB_NAME", "values": ["gqa-12-1-*"]}] for c in calls)


def test_an_attempt_batch_does_not_know_is_none(aws, batch_logs):
    compute, _ = aws
    _, job = two_attempts(compute)
    assert batch_logs.attempt(replace(job, id="77"), 1) is None
    assert batch_logs.attempt(replace(job, proc_token="00000000-dead-beef-0000-000000000000"), 2) is None


def test_an_ended_attempt_is_looked_up_once(aws, batch_logs):
    compute, _ = aws
    _, job = two_attempts(compute)
    first = batch_logs.attempt(job, 1), batch_logs.attempt(job, 2)
    calls = capture(compute.client)
    assert (batch_logs.attempt(job, 1), batch_logs.attempt(job, 2)) == first
    assert calls == []


def test_a_relaunched_attempt_is_read_from_the_batch_job_the_record_names(aws, batch_logs):
    compute, _ = aws
    record = job_record(id="12", group="12", state=JobState.RUNNING)
    lost = launch(compute, record, SPOT, 1)     # launched, but the record was never updated: launched again
    assert batch_logs.attempt(lost, 1).source == f"Batch job {lost.proc_token}"
    again = launch(compute, record, ON_DEMAND, 1)
    assert batch_logs.attempt(again, 1).source == f"Batch job {again.proc_token}"


def described(job, status: str, **fields) -> dict:
    """A DescribeJobs answer for the job's attempt, in the shape AWS documents."""
    return {"jobs": [{"jobId": job.proc_token, "jobName": "gqa-12-1-train", "status": status, "jobQueue": "q",
                      "jobDefinition": "d", "createdAt": 1, **fields}]}


def test_an_attempt_without_a_stream_is_described_again_until_it_has_one(aws, batch_logs):
    compute, _ = aws
    job = launch(compute, job_record(id="12", group="12", state=JobState.RUNNING), SPOT, 1)
    batch_says = described(job, "RUNNABLE", statusReason="waiting for capacity")
    asked = answer(compute.client, "DescribeJobs", batch_says)
    where = batch_logs.attempt(job, 1)
    assert (where.status, where.stream, where.started_at, where.detail) == ("RUNNABLE", None, None,
                                                                             "waiting for capacity")
    batch_logs.attempt(job, 1)
    assert len(asked) == 2
    batch_says["jobs"][0].update(status="RUNNING", startedAt=2_000, container={"logStreamName": "train/default/abc"})
    assert [batch_logs.attempt(job, 1).stream for _ in range(3)] == ["train/default/abc"] * 3
    assert len(asked) == 3      # a stream, once named, is not asked for again


@pytest.mark.parametrize("container, group, stream, detail", [
    ({"logStreamName": "train/default/abc",
      "logConfiguration": {"logDriver": "awslogs", "options": {"awslogs-group": "/gqa/train"}}},
     "/gqa/train", "train/default/abc", ""),
    ({"logStreamName": "train/default/abc", "logConfiguration": {"logDriver": "splunk", "options": {}}},
     DEFAULT_GROUP, None, "its output goes to the splunk log driver, not CloudWatch Logs"),
    ({"reason": "CannotPullContainerError: pull access denied"},
     DEFAULT_GROUP, None, "CannotPullContainerError: pull access denied"),
])
def test_the_stream_and_group_are_read_as_batch_describes_them(aws, batch_logs, container, group, stream, detail):
    compute, _ = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    answer(compute.client, "DescribeJobs", {"jobs": [
        {"jobId": job.proc_token, "jobName": "gqa-12-1-train", "status": "FAILED", "jobQueue": "q",
         "jobDefinition": "d", "createdAt": 1, "startedAt": 1_700_000_000_000, "container": container}]})
    where = batch_logs.attempt(job, 1)
    assert (where.group, where.stream, where.detail, where.started_at) == (group, stream, detail, 1_700_000_000.0)


# -- reading a stream -----------------------------------------------------------------------------------

def test_a_stream_is_read_from_the_head_and_resumed_from_the_token(aws, batch_logs):
    compute, logs = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    where = batch_logs.attempt(job, 1)
    write(logs, where.stream, *(f"step {i}" for i in range(5)))
    head = batch_logs.read(where, None, 2)
    assert (head.lines, head.caught_up) == (("step 0", "step 1"), False)
    rest = batch_logs.read(where, head.token, 100)
    assert (rest.lines, rest.caught_up) == (("step 2", "step 3", "step 4"), True)
    assert batch_logs.read(where, rest.token, 100).lines == ()
    write(logs, where.stream, "step 5")
    late = batch_logs.read(where, rest.token, 100)
    assert (late.lines, late.caught_up) == (("step 5",), True)


class EmptyPages:
    """CloudWatch Logs answering empty pages with a token that keeps moving
    (it may, before the end of a stream that is written faster than read)."""

    def __init__(self):
        self.asked: list[str | None] = []

    def get_log_events(self, **request):
        self.asked.append(request.get("nextToken"))
        return {"events": [], "nextForwardToken": f"f/{len(self.asked)}"}


def test_reading_gives_up_after_max_calls_while_the_token_still_moves(aws):
    compute, _ = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    cloudwatch = EmptyPages()
    reader = BatchLogs(compute.client, cloudwatch, POOLS, max_calls=3)
    chunk = reader.read(reader.attempt(job, 1), "f/0", 10)
    assert (chunk.lines, chunk.token, chunk.caught_up) == ((), "f/3", False)
    assert cloudwatch.asked == ["f/0", "f/1", "f/2"]


def test_a_full_page_stops_reading(aws, batch_logs):
    compute, logs = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    where = batch_logs.attempt(job, 1)
    write(logs, where.stream, *"abcdef")
    calls = capture(logs, "GetLogEvents")
    chunk = batch_logs.read(where, None, 4)
    assert (chunk.lines, chunk.caught_up) == (("a", "b", "c", "d"), False)
    assert [c["limit"] for c in calls] == [4]


def test_a_stream_that_does_not_exist_is_not_found(aws, batch_logs):
    compute, _ = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    with pytest.raises(NotFound):
        batch_logs.read(batch_logs.attempt(job, 1), None, 10)


def test_a_token_cloudwatch_refuses_is_a_clear_error(aws, batch_logs):
    compute, logs = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    where = batch_logs.attempt(job, 1)
    write(logs, where.stream, "x")
    with pytest.raises(SpecError, match="the log token does not fit log stream .*; start again without it"):
        batch_logs.read(where, "garbage", 10)


@pytest.mark.parametrize("code", ["ThrottlingException", "ServiceUnavailableException"])
def test_throttling_and_outages_are_retried(aws, batch_logs, code):
    compute, logs = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    refused_batch = refuse(compute.client, "DescribeJobs", "TooManyRequestsException", 2)
    where = batch_logs.attempt(job, 1)
    write(logs, where.stream, "x")
    refused_logs = refuse(logs, "GetLogEvents", code, 2)
    assert batch_logs.read(where, None, 10).lines == ("x",)
    assert (len(refused_batch), len(refused_logs), len(batch_logs.sleeps)) == (2, 2, 4)


def test_throttling_that_does_not_stop_is_backend_unavailable(aws, batch_logs):
    compute, logs = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    where = batch_logs.attempt(job, 1)
    refuse(logs, "GetLogEvents", "ThrottlingException", 3)
    with pytest.raises(BackendUnavailable, match="CloudWatch Logs kept refusing GetLogEvents"):
        batch_logs.read(where, None, 10)


# -- the service over the adapter -----------------------------------------------------------------------

def test_a_reclaimed_then_finished_job_reads_as_one_log(aws, batch_logs):
    compute, logs = aws
    first, second = two_attempts(compute)
    write(logs, stream_of(compute, first.proc_token), "epoch 1", "reclaimed at step 40")
    write(logs, stream_of(compute, second.proc_token), "resumed from step 40", "done")
    records = FakeRecords()
    records.put(replace(second, state=JobState.SUCCEEDED))
    page = LogService(records, batch_logs).page("12")
    assert [line.split(" on ")[0] if line.startswith("---") else line for line in page.lines] == [
        "--- gqa: attempt 1 of job 12", "epoch 1", "reclaimed at step 40",
        "--- gqa: attempt 2 of job 12", "resumed from step 40", "done"]
    assert page.lines[3].startswith(f"--- gqa: attempt 2 of job 12 on Batch job {second.proc_token} at ")
    assert page.lines[3].endswith(" UTC: python train.py")
    assert page.done


def test_of_two_batch_jobs_named_for_one_attempt_the_latest_is_taken(aws, batch_logs):
    compute, _ = aws
    summaries = [{"jobId": job_id, "jobName": name, "createdAt": created, "status": "FAILED"}
                 for job_id, name, created in [("A", "gqa-12-1-train", 5), ("B", "gqa-12-1-train", 9),
                                               ("C", "gqa-12-10-train", 20), ("D", "gqa-120-1-train", 30)]]
    answer(compute.client, "ListJobs", {"jobSummaryList": summaries})
    assert batch_logs.find("12", 1) == "B"
    assert batch_logs.find("12", 2) is None


class PagedListJobs:
    """Batch answering ListJobs in pages of one job (it pages at 100)."""

    def __init__(self, names: list[str]):
        self.names = names
        self.asked: list[dict] = []

    def list_jobs(self, **request):
        self.asked.append(request)
        at = int(request.get("nextToken", "0"))
        out = {"jobSummaryList": [{"jobId": f"id-{at}", "jobName": self.names[at], "createdAt": at}]}
        if at + 1 < len(self.names):
            out["nextToken"] = str(at + 1)
        return out


def test_every_page_of_list_jobs_is_read():
    batch = PagedListJobs(["gqa-12-1-a", "gqa-12-1-b", "gqa-12-1-c"])
    reader = BatchLogs(batch, None, POOLS[:1])
    assert reader.find("12", 1) == "id-2"
    assert [r.get("nextToken") for r in batch.asked] == [None, "1", "2"]


def test_following_a_job_costs_one_get_log_events_a_quiet_poll_and_no_batch_call(aws, batch_logs):
    compute, logs = aws
    first, second = two_attempts(compute)
    write(logs, stream_of(compute, first.proc_token), "epoch 1")
    write(logs, stream_of(compute, second.proc_token), "epoch 2")
    records = FakeRecords()
    records.put(second)                                  # still RUNNING as far as the record says
    service = LogService(records, batch_logs)
    batch_calls, log_calls = capture(compute.client), capture(logs)
    page = service.page("12")
    assert page.lines[-1] == "epoch 2" and not page.done
    first_read = ([c["_operation"] for c in batch_calls], len(log_calls))
    assert first_read == (["ListJobs", "ListJobs", "DescribeJobs", "DescribeJobs"], 4)
    batch_calls.clear(), log_calls.clear()
    for _ in range(3):
        page = service.page("12", token=page.token)
    assert (page.lines, batch_calls, len(log_calls)) == ((), [], 3)
    write(logs, stream_of(compute, second.proc_token), "epoch 3")
    log_calls.clear()
    assert service.page("12", token=page.token).lines == ("epoch 3",)
    assert len(log_calls) == 2       # the new lines, then the token coming back unchanged


# -- resuming within what one call answered (an answer's size ends a page there: services/logs.py) ----------

def test_each_line_read_says_where_to_go_on_after_it_exactly(aws, batch_logs):
    compute, logs = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    where = batch_logs.attempt(job, 1)
    lines = tuple(f"step {i}" for i in range(6))
    write(logs, where.stream, *lines)
    head = batch_logs.read(where, None, 2)                   # the rest then comes in the answer to a token
    whole = batch_logs.read(where, head.token, 100)
    for read, given in ((head, 0), (whole, 2)):
        assert read.after is not None and len(read.after) == len(read.lines)
        for k, position in enumerate(read.after):
            assert batch_logs.read(where, position, 100).lines == lines[given + k + 1:]
    again = batch_logs.read(where, whole.after[-1], 100)
    assert (again.lines, again.caught_up) == ((), True)
    write(logs, where.stream, "step 6")
    assert batch_logs.read(where, again.token, 100).lines == ("step 6",)


class SmallPages:
    """CloudWatch Logs answering at most `per_call` events however many are asked (its 1 MB), its
    tokens the stream's offsets; each call's request kept."""

    def __init__(self, events: list[str], per_call: int):
        self.events, self.per_call = events, per_call
        self.asked: list[dict] = []

    def get_log_events(self, **request):
        self.asked.append(request)
        at = int(request.get("nextToken", "f/0")[2:])
        got = self.events[at:at + min(request["limit"], self.per_call)]
        return {"events": [{"message": m} for m in got], "nextForwardToken": f"f/{at + len(got)}"}


def test_a_position_skips_what_was_given_across_answers_smaller_than_before(aws):
    compute, _ = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    cloudwatch = SmallPages([f"line {i}" for i in range(10)], per_call=5)
    reader = BatchLogs(compute.client, cloudwatch, POOLS)
    where = reader.attempt(job, 1)
    first = reader.read(where, None, 5)
    assert first.after[3] == "#4"                            # four events into the answer from the head
    cloudwatch.per_call = 3                                  # then it answers less than it did
    rest = reader.read(where, first.after[3], 100)
    assert rest.lines == ("line 4", "line 5", "line 6", "line 7", "line 8", "line 9") and rest.caught_up
    assert cloudwatch.asked[1]["limit"] == 104               # the four given again, then as many as asked


def test_reading_stops_once_the_lines_hold_max_bytes(aws):
    compute, _ = aws
    job = launch(compute, job_record(id="12", group="12"), SPOT, 1)
    cloudwatch = SmallPages(["é" * 5] * 20, per_call=2)     # 10 bytes of UTF-8 a line
    reader = BatchLogs(compute.client, cloudwatch, POOLS, max_bytes=25)
    chunk = reader.read(reader.attempt(job, 1), None, 100)
    assert (len(chunk.lines), chunk.token, chunk.caught_up, len(cloudwatch.asked)) == (4, "f/4", False, 2)
