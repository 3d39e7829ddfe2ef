"""The api function's hold, release and update routes on moto: owners and
admins only, every refusal leaving the tables as they were, the answers'
statuses those of the domain errors."""

from __future__ import annotations

import json

import pytest

from gqa.models.job import JobState
from gqa.scheduling import Policy
from tests.aws.moto_support import session
from tests.aws.test_api_handler import api  # noqa: F401  (the fixture: the handler on moto)

pytestmark = pytest.mark.aws


def test_an_owner_holds_releases_and_updates_their_job(api):  # noqa: F811
    job_id = api.job("alice", resources={"gpus": 2}, limits={"wall_time": "4h"})

    status, answer = api("POST", f"/jobs/{job_id}/hold", "alice")
    assert status == 200 and answer["results"][0]["action"] == "held"
    stored = api.store.get(job_id)
    assert (stored.state, stored.user_hold, stored.reason) == (JobState.HELD, True, "held by alice")

    status, answer = api("POST", f"/jobs/{job_id}/update", "alice", body={"time": 3600, "gpus": 1})
    assert status == 200 and answer["results"][0]["detail"] == "wall time 4h00m -> 1h00m, GPUs 2 -> 1"
    stored = api.store.get(job_id)
    assert (stored.state, stored.gpus, stored.wall_time, stored.spec.resources.gpus) == (JobState.HELD, 1, 3600, 1)
    assert "spec_json" not in answer["results"][0]["job"]       # the spec never travels

    status, answer = api("POST", f"/jobs/{job_id}/release", "alice")
    assert status == 200 and answer["results"][0]["action"] == "released"
    assert (api.store.get(job_id).state, api.store.get(job_id).user_hold) == (JobState.QUEUED, False)
    # the dispatcher is woken for each change, naming the job, with its item as written riding along
    wakes = [json.loads(m["Body"]) for m in session().client("sqs").receive_message(
        QueueUrl=api.urls.wakeup, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])]
    assert [w["jobs"] for w in wakes] == [[job_id]] * 3
    assert wakes[-1]["items"][job_id]["state"] == {"S": "QUEUED"} and wakes[-1]["items"][job_id]["gpus"] == {"N": "1"}


def test_admins_hold_anyones_jobs_and_a_second_hold_is_unchanged(api):  # noqa: F811
    first, second = api.job("alice"), api.job("bob")
    status, answer = api("POST", f"/jobs/{first},{second}/hold", "root-ops")
    assert status == 200 and [r["action"] for r in answer["results"]] == ["held", "held"]
    _, answer = api("POST", f"/jobs/{first}/hold", "alice")
    assert (answer["results"][0]["action"], answer["results"][0]["detail"]) == ("unchanged", "already held")


@pytest.mark.parametrize("who, path, body", [
    ("bob", "/jobs/{q}/hold", None),
    ("carol", "/jobs/{q}/hold", None),                 # approvers hold only their own
    ("bob", "/jobs/{h}/release", None),
    ("bob", "/jobs/{q},{h}/release", None),
    ("bob", "/jobs/{q}/update", {"gpus": 1}),
    ("carol", "/jobs/{h}/update", {"time": 60}),
])
def test_a_caller_who_may_not_is_refused_and_nothing_changes(api, who, path, body):  # noqa: F811
    queued, held = api.job("alice"), api.job("alice")
    api("POST", f"/jobs/{held}/hold", "alice")
    before = api.tables()

    status, answer = api("POST", path.format(q=queued, h=held), who, body=body)

    assert (status, answer["error"]) == (403, "NotPermitted")
    assert f"belongs to alice; {who} may not" in answer["message"]
    assert api.tables() == before


@pytest.mark.parametrize("body, status, error, words", [
    ({"gpus": 5}, 422, "Rejected", "job 1 cannot be updated: it asks for 5 GPUs; the queue has 4"),
    ({"gpus": 3}, 422, "Rejected", "would then need approval: asks for 3 GPUs (approval needed over 2)"),
    ({"priority": 1}, 400, "SpecError", "priority must be high, normal or low, got 1"),
    ({"priority": "urgent"}, 400, "SpecError", "unknown priority 'urgent'"),
    ("not json", 400, "SpecError", "the request body is not JSON"),
])
def test_a_refused_update_answers_its_status_and_changes_nothing(api, body, status, error, words):  # noqa: F811
    api.store.set_policy(Policy(approval_gpus=2))
    job_id = api.job("alice")
    before = api.tables()

    answer = api("POST", f"/jobs/{job_id}/update", "alice", body=body)

    assert (answer[0], answer[1]["error"]) == (status, error) and words in answer[1]["message"], answer
    assert api.tables() == before


def test_a_running_job_cannot_be_held_or_updated(api):  # noqa: F811
    job_id = api.running("alice")
    before = api.tables()
    status, answer = api("POST", f"/jobs/{job_id}/hold", "alice")
    assert (status, answer["error"]) == (409, "InvalidTransition") and "only a pending job can be held" in \
        answer["message"]
    status, answer = api("POST", f"/jobs/{job_id}/update", "alice", body={"time": 60})
    assert (status, answer["error"]) == (409, "InvalidTransition")
    assert api.tables() == before
