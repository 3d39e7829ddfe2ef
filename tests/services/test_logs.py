"""The log service's paging rules over an in-memory JobLogs: every attempt in
order under its header, tokens that continue where a page stopped, `done`
only once nothing more can come, and clear errors for jobs without output."""

from __future__ import annotations

import pytest

from gqa.models.errors import BackendUnavailable, NotAdmitted, NotFound, NotStarted, SpecError
from gqa.models.job import JobState
from gqa.services.logs import Cursor, LogPage, LogService, header
from tests.builders import NOW, attempt_log, job_record
from tests.services.fakes import FakeJobLogs, FakeRecords

HEADER_1 = "--- gqa: attempt 1 of job 12 on Batch job b-1 at 1970-01-12 13:46:40 UTC: python train.py"


def job(state: JobState = JobState.RUNNING, attempts: int = 1, **fields):
    return job_record(id="12", group="12", state=state, attempts=attempts, **fields)


def service(job_records, where=(), streams=None, page_size: int = 1000) -> tuple[LogService, FakeRecords, FakeJobLogs]:
    records = FakeRecords()
    records.put(*job_records)
    logs = FakeJobLogs({w.attempt: w for w in where}, dict(streams or {}), page_size)
    return LogService(records, logs), records, logs


def read_all(svc: LogService, ref: str = "12", limit: int = 1000, attempt=None) -> tuple[list[str], list[LogPage]]:
    """Page until a page comes back empty or done; every line and page."""
    lines, pages, token = [], [], None
    for _ in range(100):
        page = svc.page(ref, attempt=attempt, token=token, limit=limit)
        pages.append(page)
        lines.extend(page.lines)
        token = page.token
        if page.done or not page.lines:
            return lines, pages
    raise AssertionError("paging did not end")


# -- one attempt ----------------------------------------------------------------------------------------

def test_the_running_attempt_is_headed_then_read_and_a_token_continues_after_it():
    svc, _, logs = service([job()], [attempt_log(1)], {"stream-1": ["step 1", "step 2"]})
    first = svc.page("12")
    assert first.lines == (HEADER_1, "step 1", "step 2")
    assert (first.attempt, first.done) == (1, False)
    assert svc.page("12", token=first.token).lines == ()          # nothing new: nothing repeated
    logs.streams["stream-1"].append("step 3")
    assert svc.page("12", token=first.token).lines == ("step 3",)


def test_the_header_says_what_the_local_log_file_says_about_an_attempt():
    record = job(spec={"command": ["python", "train.py", "--lr", "0.1 0.2"]})
    where = attempt_log(3, source="Batch job 5f0c", started_at=NOW + 60)
    assert header(record, 3, where) == (
        "--- gqa: attempt 3 of job 12 on Batch job 5f0c at 1970-01-12 13:47:40 UTC: "
        "python train.py --lr '0.1 0.2'")
    assert header(record, 3, None) == "--- gqa: attempt 3 of job 12: python train.py --lr '0.1 0.2'"
    assert header(record, 3, attempt_log(3, started_at=None)).startswith(
        "--- gqa: attempt 3 of job 12 on Batch job b-3: ")


def test_a_finished_job_ends_with_done_and_calling_again_adds_nothing():
    svc, _, _ = service([job(JobState.SUCCEEDED)], [attempt_log(1, status="SUCCEEDED")], {"stream-1": ["ok"]})
    page = svc.page("12")
    assert (page.lines, page.done) == ((HEADER_1, "ok"), True)
    again = svc.page("12", token=page.token)
    assert (again.lines, again.done) == ((), True)


def test_the_last_lines_of_an_attempt_come_before_done_once_the_job_ends():
    record = job()
    svc, records, logs = service([record], [attempt_log(1)], {"stream-1": ["a"]})
    page = svc.page("12")
    logs.streams["stream-1"] += ["b", "c"]
    records.put(job(JobState.FAILED))
    last = svc.page("12", token=page.token)
    assert (last.lines, last.done) == (("b", "c"), True)


# -- several attempts -----------------------------------------------------------------------------------

def three_attempts(state: JobState = JobState.SUCCEEDED, page_size: int = 1000):
    where = [attempt_log(1, status="FAILED"), attempt_log(2, status="FAILED"),
             attempt_log(3, status="SUCCEEDED" if state.terminal else "RUNNING")]
    streams = {"stream-1": ["1a", "1b", "1c"], "stream-2": ["2a"], "stream-3": ["3a", "3b"]}
    return service([job(state, attempts=3)], where, streams, page_size)


def test_every_attempt_in_order_each_under_its_header():
    svc, _, _ = three_attempts()
    page = svc.page("12")
    assert [line for line in page.lines if not line.startswith("---")] == ["1a", "1b", "1c", "2a", "3a", "3b"]
    assert [line.split(" of ")[0] for line in page.lines if line.startswith("---")] == [
        "--- gqa: attempt 1", "--- gqa: attempt 2", "--- gqa: attempt 3"]
    assert page.lines.index("1c") < page.lines.index("--- gqa: attempt 2 of job 12 on Batch job b-2 at "
                                                     "1970-01-12 13:46:40 UTC: python train.py")
    assert (page.attempt, page.done) == (3, True)


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("page_size", [1, 2, 1000])
def test_small_pages_add_up_to_the_whole_log(limit, page_size):
    whole = three_attempts()[0].page("12").lines
    lines, pages = read_all(three_attempts(page_size=page_size)[0], limit=limit)
    assert tuple(lines) == whole
    assert pages[-1].done and not any(p.done for p in pages[:-1])
    assert all(len(p.lines) <= limit + 1 for p in pages)      # a header may come on top of a full read


def test_one_attempt_only_and_done_once_it_is_over_though_the_job_runs_on():
    svc, _, _ = three_attempts(JobState.RUNNING)
    page = svc.page("12", attempt=2)
    assert page.lines == ("--- gqa: attempt 2 of job 12 on Batch job b-2 at 1970-01-12 13:46:40 UTC: python train.py",
                          "2a")
    assert (page.attempt, page.done) == (2, True)
    live = svc.page("12", attempt=3)
    assert (live.lines[1:], live.done) == (("3a", "3b"), False)


def test_an_attempt_over_but_no_next_one_yet_waits_without_repeating_itself():
    svc, records, logs = service([job(JobState.RETRY_WAIT)], [attempt_log(1, status="FAILED")],
                                 {"stream-1": ["reclaimed"]})
    page = svc.page("12")
    assert (page.lines, page.done) == ((HEADER_1, "reclaimed"), False)
    assert svc.page("12", token=page.token).lines == ()
    records.put(job(JobState.RUNNING, attempts=2))
    logs.where[2] = attempt_log(2)
    logs.streams["stream-2"] = ["resumed from step 40"]
    nxt = svc.page("12", token=page.token)
    assert nxt.lines[0].startswith("--- gqa: attempt 2 of job 12 ")
    assert (nxt.lines[1:], nxt.attempt) == (("resumed from step 40",), 2)


# -- attempts without output ----------------------------------------------------------------------------

def test_an_attempt_that_never_ran_says_why_and_the_next_follows():
    where = [attempt_log(1, stream=None, status="FAILED", detail="CannotPullContainerError: no such image"),
             attempt_log(2, status="SUCCEEDED")]
    svc, _, _ = service([job(JobState.SUCCEEDED, attempts=2)], where, {"stream-2": ["ok"]})
    lines = svc.page("12").lines
    assert lines[1] == ("--- gqa: attempt 1 left no output (Batch job b-1 FAILED: "
                        "CannotPullContainerError: no such image)")
    assert lines[-1] == "ok"


def test_an_attempt_the_backend_forgot_is_headed_and_named_as_lost():
    svc, _, _ = service([job(JobState.SUCCEEDED, attempts=2)], [attempt_log(2, status="SUCCEEDED")],
                        {"stream-2": ["ok"]})
    lines = svc.page("12").lines
    assert lines[:2] == ("--- gqa: attempt 1 of job 12: python train.py",
                         "--- gqa: the output of attempt 1 cannot be found: "
                         "the compute backend no longer knows the attempt")
    assert lines[-1] == "ok"


def test_a_stream_not_written_yet_is_waited_for_and_one_that_never_came_is_named():
    svc, records, logs = service([job()], [attempt_log(1)], {})
    page = svc.page("12")
    assert (page.lines, page.done) == ((HEADER_1,), False)
    records.put(job(JobState.SUCCEEDED))
    last = svc.page("12", token=page.token)
    assert last.lines == ("--- gqa: attempt 1 left no output (log stream stream-1 in /aws/batch/job does not exist: "
                          "nothing was written, or it expired)",)
    assert last.done


def test_a_starting_attempt_without_a_stream_is_waited_for():
    svc, _, _ = service([job()], [attempt_log(1, stream=None, status="RUNNABLE")])
    page = svc.page("12")
    assert (page.lines, page.done) == ((HEADER_1,), False)
    assert svc.page("12", token=page.token).lines == ()


# -- errors ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("state, reason, error, message", [
    (JobState.QUEUED, "needs 4 GPUs of a10g, 2 free", NotStarted,
     "job 12 has not started yet; it is QUEUED: needs 4 GPUs of a10g, 2 free"),
    (JobState.PENDING_APPROVAL, "", NotStarted, "job 12 has not started yet; it is PENDING_APPROVAL"),
    (JobState.CANCELLED, "cancelled by alice", NotFound,
     "job 12 never started, so it has no output; it is CANCELLED: cancelled by alice"),
])
def test_a_job_that_has_not_started_says_so_and_in_what_state(state, reason, error, message):
    svc, _, _ = service([job(state, attempts=0, reason=reason)])
    with pytest.raises(NotFound) as caught:
        svc.page("12")
    assert type(caught.value) is error
    assert str(caught.value) == message


@pytest.mark.parametrize("state, error, message", [
    (JobState.RUNNING, NotStarted, "job 12 has had 2 attempts; attempt 3 has not started; it is RUNNING"),
    (JobState.SUCCEEDED, NotFound, "job 12 has had 2 attempts and has ended, so attempt 3 never ran; it is SUCCEEDED"),
])
def test_an_attempt_beyond_the_last_has_not_started(state, error, message):
    svc, _, _ = service([job(state, attempts=2)], [attempt_log(1), attempt_log(2)])
    with pytest.raises(NotFound) as caught:
        svc.page("12", attempt=3)
    assert (type(caught.value), str(caught.value)) == (error, message)


def test_an_unknown_job_is_not_found():
    svc, _, _ = service([job()])
    with pytest.raises(NotFound, match="no job or array 99") as caught:
        svc.page("99")
    assert type(caught.value) is NotFound


def test_a_job_accepted_but_not_recorded_yet_is_not_started_so_a_follower_waits():
    svc, records, _ = service([])
    records.handed_out.add("12")
    with pytest.raises(NotAdmitted, match="job 12 was accepted and is waiting for admission") as caught:
        svc.page("12")
    assert isinstance(caught.value, NotStarted)


def test_an_array_asks_for_one_of_its_jobs():
    tasks = [job_record(id=f"7_{i}", group="7", array_index=i, attempts=1) for i in (2, 3, 4)]
    svc, _, _ = service(tasks)
    with pytest.raises(SpecError) as caught:
        svc.page("7")
    assert str(caught.value) == ("7 is an array of 3 jobs; name one task as GROUP_INDEX: gqa logs 7_2 "
                                 "(or gqa logs 7 --index 2); its tasks are 2-4")


def other_job_token() -> str:
    return Cursor("13", 1, headed=True).encode()


@pytest.mark.parametrize("kwargs, message", [
    ({"token": "not a token"}, "not a log token gqa gave out"),
    ({"token": "eyJhIjogMX0"}, "not a log token gqa gave out"),                   # JSON, but not ours
    ({"token": Cursor("12", 0).encode()}, "not a log token gqa gave out"),        # attempt 0 does not exist
    ({"token": other_job_token()}, "that log token belongs to job 13, not job 12"),
    ({"token": Cursor("12", 1).encode(), "attempt": 2}, "that log token continues attempt 1, not attempt 2"),
    ({"token": Cursor("12", 5).encode()}, "that log token points at attempt 5; job 12 has had 2"),
    ({"attempt": 0}, "attempts are numbered from 1, not 0"),
    ({"limit": 0}, "a log page holds 1 to 10000 lines, not 0"),
    ({"limit": 10_001}, "a log page holds 1 to 10000 lines, not 10001"),
])
def test_bad_requests_are_refused_with_what_is_wrong(kwargs, message):
    svc, _, _ = service([job(attempts=2)], [attempt_log(1), attempt_log(2)], {"stream-1": [], "stream-2": []})
    with pytest.raises(SpecError, match=message):
        svc.page("12", **kwargs)


# -- the wire form --------------------------------------------------------------------------------------

def test_a_page_survives_the_wire():
    svc, _, _ = three_attempts()
    page = svc.page("12", limit=2)
    assert LogPage.from_dict(page.to_dict()) == page
    assert page.to_dict() == {"lines": list(page.lines), "token": page.token, "attempt": 1, "done": False}


@pytest.mark.parametrize("data", [
    None,
    {"token": "t", "attempt": 1, "done": False},
    {"lines": "a b", "token": "t", "attempt": 1, "done": False},
    {"lines": ["a", 2], "token": "t", "attempt": 1, "done": False},
    {"lines": [], "token": None, "attempt": 1, "done": False},
    {"lines": [], "token": "t", "attempt": "1", "done": False},
    {"lines": [], "token": "t", "attempt": 1, "done": "no"},
])
def test_a_malformed_page_from_the_wire_is_a_backend_error(data):
    with pytest.raises(BackendUnavailable, match="the API sent a log page"):
        LogPage.from_dict(data)


# -- an answer bounded in bytes (the API's: Lambda's 6 MB) ---------------------------------------------

def by_bytes(line: str) -> int:
    return len(line.encode()) + 1


def test_a_page_ends_at_the_last_line_its_bytes_hold_and_the_next_goes_on_after_it():
    written = [f"{n:03d} " + "é" * 40 for n in range(50)]          # 85 bytes a line
    svc, _, _ = service([job(JobState.SUCCEEDED)], [attempt_log(1)], {"stream-1": written})
    lines, pages, token = [], [], None
    while not pages or not pages[-1].done:
        pages.append(svc.page("12", token=token, size=by_bytes, budget=1000))
        token = pages[-1].token
        assert sum(map(by_bytes, pages[-1].lines)) <= 1000
        lines += pages[-1].lines
    assert lines == [HEADER_1, *written]                            # each once, none cut
    assert [len(p.lines) for p in pages] == [11, 11, 11, 11, 7]        # the header and 10 lines, then 11 a page


def test_a_line_longer_than_a_page_is_cut_and_says_so_and_the_next_page_moves_on():
    svc, _, _ = service([job(JobState.SUCCEEDED)], [attempt_log(1)], {"stream-1": ["x" * 5000, "after"]})
    first = svc.page("12", size=by_bytes, budget=1000)
    assert first.lines == (HEADER_1,)
    second = svc.page("12", token=first.token, size=by_bytes, budget=1000)
    [cut] = second.lines
    assert cut.startswith("x" * 900) and cut.endswith(" more characters: longer than a page holds]")
    assert by_bytes(cut) <= 1000 and "cut here, 4," in cut
    third = svc.page("12", token=second.token, size=by_bytes, budget=1000)
    assert (third.lines, third.done) == (("after",), True)


def test_a_backend_that_resumes_only_after_a_whole_read_gives_all_it_read():
    written = [f"{n:03d} " + "x" * 80 for n in range(30)]
    svc, _, logs = service([job(JobState.SUCCEEDED)], [attempt_log(1)], {"stream-1": written})
    logs.resumes = False
    page = svc.page("12", size=by_bytes, budget=1000)
    assert page.lines == (HEADER_1, *written) and page.done        # over the budget, but never a line lost
