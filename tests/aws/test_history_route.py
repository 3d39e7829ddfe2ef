"""GET /history on the api function (moto): a page of job summaries, the
window and filters in the query, pages by `next`; bad input is 400 and
names the parameter. Everyone may read it, as the queue."""

from __future__ import annotations

import os
import time
from unittest import mock

import pytest

from gqa.adapters.aws import items as it
from gqa.adapters.aws import tables as t
from gqa.http import wire
from gqa.models.job import JobState
from gqa.ports import Change
from tests.aws.test_api_handler import NAMES, api  # noqa: F401  (the fixture)

pytestmark = pytest.mark.aws
S = JobState
DAY = 86_400


def finish(api, owner: str, state: JobState, ended: float) -> str:  # noqa: F811
    job_id = api.running(owner)
    api.store.apply([Change(job_id, S.RUNNING, state, "done", ended,
                            {"ended_at": ended, "exit_code": 0 if state == S.SUCCEEDED else 1})])
    return job_id


def test_a_page_of_summaries_newest_end_first_then_the_next(api):  # noqa: F811
    now = time.time()
    first, second = finish(api, "alice", S.SUCCEEDED, now - 60), finish(api, "bob", S.FAILED, now - 30)
    status, page = api("GET", "/history", "carol", query={"since": str(now - DAY), "limit": "1"})
    assert status == 200 and [j["id"] for j in page["jobs"]] == [second] and page["next"]
    row = wire.summary_from_dict(page["jobs"][0])
    assert (row.owner, row.state, row.exit_code, row.ended_at) == ("bob", S.FAILED, 1, now - 30)
    status, rest = api("GET", "/history", "carol", query={"since": str(now - DAY), "limit": "1", "next": page["next"]})
    assert status == 200 and [j["id"] for j in rest["jobs"]] == [first] and rest["next"] is None
    status, mine = api("GET", "/history", "alice", query={"since": str(now - DAY), "owner": "alice",
                                                          "state": "SUCCEEDED,FAILED"})
    assert [j["id"] for j in mine["jobs"]] == [first]


@pytest.mark.parametrize("query, words", [
    ({}, "since is required"),
    ({"since": "yesterday"}, "since must be a time in epoch seconds"),
    ({"since": "0", "state": "DONE"}, "state must be job states"),
    ({"since": "0", "state": "PENDING_APPROVAL"}, "history lists the jobs that have run or finished, and a "
                                                   "PENDING_APPROVAL job has not run yet"),
    ({"since": "0", "limit": "5000"}, "a history page holds 1 to 1,000 jobs"),
    ({"since": "0", "next": "bogus"}, "is not a page token of a history"),
    ({"since": "1796653029", "until": "1796573829"}, "the window ends (2026-12-06 16:17:09 UTC) at or before it "
                                                     "begins (2026-12-07 14:17:09 UTC): --until must be later"),
    ({"since": "1e300", "until": "0"}, "the window ends (1970-01-01 00:00:00 UTC) at or before it begins "
                                       "(1e+300 s from 1970-01-01 UTC)"),
    ({"since": "0", "until": "1e12"}, "the window ends at 1e+12 s from 1970-01-01 UTC: history holds times from "
                                      "1970-01-01 00:00:00 UTC to a year from now"),
    ({"since": "-5"}, "the window begins at 1969-12-31 23:59:55 UTC: history holds times from 1970-01-01"),
])
def test_bad_queries_are_400_and_name_what_is_wrong(api, query, words):  # noqa: F811
    status, answer = api("GET", "/history", "alice", query=query)
    assert status == 400 and answer["error"] == "SpecError" and words in answer["message"]


def test_a_job_cancelled_through_the_api_expires_when_the_deployment_says(api):  # noqa: F811
    with mock.patch.dict(os.environ, {"GQA_KEEP_HISTORY_DAYS": "30"}):
        api.module.container.cache_clear()
        job_id = api.job("alice")
        status, _ = api("POST", f"/jobs/{job_id}/cancel", "alice")
        assert status == 200
    item = it.load(api.store.client.get_item(TableName=NAMES.jobs, Key=it.dump(it.job_key(job_id)))["Item"])
    assert item["state"] == "CANCELLED" and item[t.JOB_EXPIRES] == int(float(item["ended_at"]) + 30 * DAY) + 1
