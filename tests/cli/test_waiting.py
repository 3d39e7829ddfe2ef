"""`gqa submit --wait` on an array polls the group, once per poll, whatever
the array's size, and tells a large array's end as counts."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from cli import waiting
from gqa.models.job import JobState
from tests.builders import job_record


@dataclass
class Queries:
    """A backend's queries over an array whose tasks end after `polls` reads."""

    jobs_by_id: dict
    polls: int
    reads: list = field(default_factory=list)

    def jobs(self, ref: str, *, history: bool = True):
        self.reads.append(ref)
        state = JobState.SUCCEEDED if len(self.reads) >= self.polls else JobState.RUNNING
        return [replace(j, state=state if j.id != "1_7" else (JobState.FAILED if state.terminal else state))
                for j in self.jobs_by_id.values()]


@dataclass
class Backend:
    queries_: Queries
    local: bool = True
    poll_interval: float = 0.0

    def queries(self):
        return self.queries_

    def daemon_pid(self):
        return 1          # running: the wait says nothing of it


@pytest.fixture
def array(monkeypatch):
    jobs = {f"1_{i}": job_record(id=f"1_{i}", group="1", array_index=i) for i in range(500)}
    queries = Queries(jobs, polls=3)
    monkeypatch.setattr("cli.backend.backend", lambda: Backend(queries))
    return queries


def test_each_poll_is_one_read_of_the_group(array):
    code, final = waiting.wait_for("1", list(array.jobs_by_id), quiet=True)
    assert array.reads == ["1", "1", "1"]                 # not 500 reads a poll
    assert code == 1 and len(final) == 500
    assert [f["id"] for f in final if f["state"] == "FAILED"] == ["1_7"]


def test_a_large_arrays_end_is_counts_and_the_jobs_that_did_not_succeed(array, capsys):
    waiting.wait_for("1", list(array.jobs_by_id))
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].endswith("500 jobs ended: 499 completed, 1 failed")
    assert len(lines) == 2 and "job 1_7 failed" in lines[1]


@dataclass
class Admitting(Queries):
    """An array whose tasks are written a chunk a read (admission in chunks on
    AWS), each task ended as soon as it is written."""

    chunk: int = 100

    def jobs(self, ref: str, *, history: bool = True):
        self.reads.append(ref)
        written = list(self.jobs_by_id.values())[:self.chunk * len(self.reads)]
        return [replace(j, state=JobState.SUCCEEDED) for j in written]


def test_tasks_still_being_admitted_count_as_not_ended(monkeypatch):
    jobs = {f"1_{i}": job_record(id=f"1_{i}", group="1", array_index=i) for i in range(500)}
    queries = Admitting(jobs, polls=0)
    monkeypatch.setattr("cli.backend.backend", lambda: Backend(queries))
    code, final = waiting.wait_for("1", list(jobs), quiet=True)
    assert len(queries.reads) == 5 and code == 0 and len(final) == 500   # not ended at the first 100 written
