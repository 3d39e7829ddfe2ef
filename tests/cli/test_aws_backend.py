"""The real `gqa` commands against the AWS backend: the CLI's ApiClient signs
each request with the caller's credentials, and API Gateway's part (check the
SigV4 signature, take the identity from the access key that signed it, build
the REST proxy event) hands it to the api Lambda handler, on moto DynamoDB and
SQS; the admit, dispatch and reconcile handlers do the rest of a job's life."""

from __future__ import annotations

import json

import pytest

from tests.aws.api_gateway import ENDPOINT
from tests.aws.fake_batch import CONTEXT
from tests.aws.transaction_conflicts import rollback_by_item

pytestmark = [pytest.mark.aws, pytest.mark.slow]


def test_a_job_submitted_runs_and_is_seen_through_status_and_queue(aws):
    me = aws.json("alice", "whoami")
    assert (me["owner"], me["roles"]) == ("alice", ["owner"])
    code, out, err = aws("alice", "submit", "--gpus", "1", "--name", "bert", "--", "python", "train.py")
    assert code == 0 and out == "1\n" and "gqa status 1" in err and "daemon is not running" not in err
    sent = aws.gateway.seen[-1]
    assert sent["method"] == "POST" and sent["url"] == f"{ENDPOINT}/jobs"
    assert sent["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAALICE")
    assert "/us-east-1/execute-api/aws4_request" in sent["headers"]["Authorization"]
    assert json.loads(sent["body"])["environment"] is None          # the laptop's environment stays home

    aws.admit()
    status = aws.json("bob", "status", "1")
    assert (status["state"], status["owner"], status["name"]) == ("QUEUED", "alice", "bert")
    assert [h["state"] for h in status["history"]] == ["SUBMITTED", "QUEUED"]
    queue = aws.json("bob", "queue")
    assert [(p["position"], p["id"], p["reason"]) for p in queue["pending"]] == [(1, "1", "starting now")]
    assert "factors" in queue["pending"][0] and queue["gpus"]["total"] == 12
    code, out, _ = aws("bob", "queue", "--explain")
    assert code == 0 and "score =" in out and "daemon not running" not in out

    [submitted] = aws.dispatch()
    aws.world.clock.advance(720)                                   # Batch finds no instance for 12 minutes
    launched = aws.json("alice", "queue")["running"]
    assert [(r["id"], r["state"]) for r in launched] == [("1", "STARTING")]
    assert "waiting for on-demand capacity in pool a10g-ondemand, 12 min" in launched[0]["reason"]
    code, out, _ = aws("alice", "queue")
    assert code == 0 and "waiting for" in out and "12 min" in " ".join(out.split())   # the table wraps it
    aws.reconcile(submitted, "RUNNING")
    assert aws.json("alice", "status", "1")["state"] == "RUNNING"
    assert [r["id"] for r in aws.json("alice", "queue")["running"]] == ["1"]
    aws.world.clock.advance(1800)
    aws.reconcile(submitted, "SUCCEEDED", exit_code=0)
    assert aws.json("alice", "status", "1")["status"] == "completed"
    cost = aws.json("alice", "cost", "--jobs", "5")
    assert cost["teams"][0]["team"] == "default" and cost["teams"][0]["settled"] > 0
    gpus = aws.json("alice", "status", "1")["gpus"]
    assert cost["teams"][0]["gpu_hours"] == gpus * 0.5                              # 30 min on its GPUs
    assert [(j["id"], j["gpu_hours"], j["cost"]) for j in cost["jobs"]] == [("1", gpus * 0.5,
                                                                              cost["teams"][0]["settled"])]


def test_status_right_after_submitting_says_the_job_waits_for_admission(aws):
    assert aws("alice", "submit", "--", "python", "train.py")[:2] == (0, "1\n")
    code, out, err = aws("alice", "status", "1")
    assert (code, out) == (2, "")
    assert "job 1 was accepted and is waiting for admission" in err and "try again in a moment" in err
    code, _, err = aws("alice", "status", "2")
    assert code == 2 and "no job or array 2" in err and "accepted" not in err

    aws.admit()
    assert aws.json("alice", "status", "1")["state"] == "QUEUED"


def test_owners_cancel_their_own_jobs_and_nobody_elses(aws):
    assert aws.json("alice", "submit", "--array", "0-2", "--", "true")["jobs"] == ["1_0", "1_1", "1_2"]
    aws.admit()
    code, _, err = aws("bob", "cancel", "1")
    assert code == 2 and "job 1_0 belongs to alice; bob may not cancel it" in err
    assert aws.json("bob", "status", "1")["counts"] == {"QUEUED": 3}
    cancelled = aws.json("alice", "cancel", "1_0", "1_2")
    assert [(c["id"], c["action"]) for c in cancelled] == [("1_0", "cancelled"), ("1_2", "cancelled")]
    assert aws.json("root-ops", "cancel", "1_1")[0]["action"] == "cancelled"     # admins cancel any


def test_a_running_job_is_requeued_by_its_owner(aws):
    aws.json("alice", "submit", "--", "true")
    aws.admit()
    [submitted] = aws.dispatch()
    aws.reconcile(submitted, "RUNNING")
    code, _, err = aws("bob", "requeue", "1")
    assert code == 2 and "bob may not requeue it" in err
    assert aws.json("alice", "requeue", "1")[0]["action"] == "requeueing"


def test_approvals_quotas_and_policy_by_role(aws):
    code, _, err = aws("alice", "quota", "policy", "--approve-over-gpus", "1")
    assert code == 2 and "alice may not set the queue policy: only admins may" in err
    assert aws.json("root-ops", "quota", "policy", "--approve-over-gpus", "1")["approval"]["gpus"] == 1
    assert aws.json("alice", "quota", "policy")["approval"]["gpus"] == 1          # anyone may read it
    assert aws.json("root-ops", "quota", "policy", "--duration-weight", "2")["weights"]["duration"] == 2.0

    aws.json("alice", "submit", "--gpus", "2", "--", "true")
    aws.json("alice", "submit", "--gpus", "2", "--", "true")
    aws.admit()
    assert aws.json("alice", "status", "1")["status"] == "awaiting approval"
    code, _, err = aws("alice", "approve", "1")
    assert code == 2 and "alice may not approve jobs" in err
    assert aws.json("carol", "approve", "1")[0]["action"] == "approved"
    assert aws.json("carol", "deny", "2", "--reason", "too big")[0]["action"] == "denied"
    assert "denied by carol: too big" in aws.json("alice", "status", "2")["reason"]

    code, _, err = aws("carol", "quota", "set", "vision", "--max-gpus", "4")
    assert code == 2 and "carol may not set team quotas" in err
    assert aws.json("root-ops", "quota", "set", "vision", "--max-gpus", "4", "--budget", "500")["max_gpus"] == 4
    shown = aws.json("alice", "quota", "show")["teams"]
    assert [(t["team"], t["max_gpus"], t["budget"]) for t in shown] == [("vision", 4, 500.0)]
    assert aws.json("alice", "cost", "--team", "vision")["teams"][0]["budget"] == 500.0


def test_bad_input_is_a_clear_error_and_sends_nothing(aws):
    code, _, err = aws("alice", "submit", "--gpus", "64", "--", "true")
    assert code == 2 and "64 GPUs" in err
    code, _, err = aws("alice", "status", "77")
    assert code == 2 and "77" in err
    code, _, err = aws("alice", "cost", "--period", "2026-13")
    assert code == 2 and "calendar month" in err
    assert aws.world.receive(1) == []


def test_a_request_signed_with_the_wrong_secret_is_refused_by_the_gateway(aws):
    code, _, err = aws("alice", "queue", secret="not-alices")
    assert code == 2 and "signature we calculated does not match" in err and "execute-api:Invoke" in err


def test_a_queue_and_an_array_past_one_page_print_as_they_do_on_one(aws, monkeypatch):
    import time
    from types import SimpleNamespace

    from cli import output
    from gqa.http import paging

    now = SimpleNamespace(time=lambda: aws.world.clock.now() + 60, strftime=time.strftime, localtime=time.localtime)
    monkeypatch.setattr(output, "time", now)        # "waiting 1m" the same however long the test takes

    aws.json("alice", "submit", "--array", "0-6", "--priority", "low", "--", "python", "sweep.py")
    aws.json("bob", "submit", "--gpus", "4", "--priority", "high", "--", "true")
    aws.json("carol", "submit", "--gpus", "2", "--", "true")
    aws.admit()
    [first, *_] = aws.dispatch()
    aws.reconcile(first, "RUNNING")
    commands = [("queue",), ("queue", "--explain"), ("status", "1"), ("queue", "-o", "json"),
                ("queue", "--explain", "-o", "json"), ("status", "1", "-o", "json")]
    one_page = [aws("bob", *c) for c in commands]
    assert all(code == 0 for code, _, _ in one_page) and all(out for _, out, _ in one_page)
    assert len(json.loads(one_page[3][1])["pending"]) >= 8          # more than a few pages of 2

    monkeypatch.setattr(paging, "DEFAULT_LIMIT", 2)
    before = len(aws.gateway.seen)
    assert [aws("bob", *c) for c in commands] == one_page
    asked = [s["url"] for s in aws.gateway.seen[before:]]
    # 8 pending in pages of 2: 4 requests a queue; 7 tasks: 4 requests a status, and 4 more for their
    # standing in the queue (GET /queue?group=1: the same positions, reasons and ETAs as `gqa queue`)
    assert (sum("/queue" in u for u in asked), sum("/jobs/1" in u for u in asked)) == (4 * 4 + 2 * 4, 2 * 4)
    assert sum("next=" in u for u in asked) == 4 * 3 + 2 * 3 + 2 * 3


def test_a_deployment_that_hands_back_a_token_twice_is_an_error_not_a_loop():
    from cli.aws_backend import Queries
    from gqa.models.errors import BackendUnavailable

    class Looping:
        def call(self, method, path, *, query=None, body=None):
            return {"jobs": [], "next": "same"}

    with pytest.raises(BackendUnavailable, match="page token it gave before"):
        Queries(Looping()).jobs("1")


def test_team_members_set_by_an_admin_decide_who_submits_for_the_team(aws):
    code, _, err = aws("alice", "quota", "set", "vision", "--members", "alice")
    assert code == 2 and "alice may not set team quotas: only admins may" in err
    assert aws.json("root-ops", "quota", "set", "vision", "--members", "alice,carol")["members"] == ["alice", "carol"]
    code, _, err = aws("bob", "submit", "--team", "vision", "--", "true")
    assert code == 2 and "bob is not a member of team vision (members: alice, carol)" in err
    shown = {t["team"]: t["members"] for t in aws.json("bob", "quota", "show")["teams"]}   # anyone may read
    assert shown["vision"] == ["alice", "carol"]
    code, out, _ = aws("bob", "quota", "show")
    assert code == 0 and "alice, carol" in " ".join(out.split())   # the table may wrap it
    assert aws.json("alice", "submit", "--", "true")["id"] == "1"       # naming no team: her only one
    aws.admit()
    assert aws.json("alice", "status", "1")["team"] == "vision"


def test_status_of_an_array_being_admitted_says_how_many_tasks_are_still_to_come(aws, monkeypatch):
    from gqa.adapters.aws import admissions

    monkeypatch.setattr(admissions, "sleep", lambda seconds: None)   # the chunk's pace, not the test's
    monkeypatch.setattr(admissions, "CHUNK_SECONDS", 0.1)            # chunks of 100 tasks
    with rollback_by_item():                                         # moto copies whole tables otherwise
        _being_admitted(aws)


def _being_admitted(aws) -> None:
    code, out, err = aws("alice", "submit", "--array", "0-299", "--", "true")
    assert (code, out) == (0, "1\n") and "300 jobs: 1_0 .. 1_299" in err
    [first] = aws.world.receive(1)
    assert aws.world.admit.handler({"Records": [first]}, CONTEXT) == {"batchItemFailures": []}   # one chunk
    status = aws.json("bob", "status", "1")
    written = sum(status["counts"].values())
    assert written == 100 and status["admitting"] == 200
    code, out, _ = aws("bob", "status", "1")
    assert code == 0 and "and 200 more still being admitted" in " ".join(out.split())
    aws.admit()                                                    # the next chunk, handed on
    aws.admit()                                                    # and the last
    assert aws.json("bob", "status", "1")["admitting"] == 0


def test_a_cancel_or_hold_the_api_makes_in_steps_is_followed_to_its_end_and_prints_as_one(aws, monkeypatch):
    from gqa.adapters.aws import admissions
    from gqa.services import control

    aws.json("alice", "submit", "--array", "0-10", "--", "true")
    aws.admit()
    code, out, err = aws("alice", "hold", "1")
    assert code == 0 and out == "".join(f"job 1_{i} held\n" for i in range(11)) and "going on" not in err

    # steps of two tasks: the API answers 11 tasks in 6 calls, each with the next's token
    monkeypatch.setattr(admissions, "SLICE", 2)
    monkeypatch.setattr(admissions, "CHUNK_SECONDS", 0.001)
    monkeypatch.setattr(control, "SLICE", 2)
    before = len(aws.gateway.seen)
    code, out, err = aws("alice", "release", "1")
    assert code == 0 and out == "".join(f"job 1_{i} released\n" for i in range(11))   # by index, as in one
    asked = [s["url"] for s in aws.gateway.seen[before:]]
    assert len(asked) == 6 and sum("next=" in u for u in asked) == 5
    assert err.count("going on") == 5 and "gqa: release: 10 jobs so far; going on" in err
    cancelled = aws.json("alice", "cancel", "1")
    assert [(c["id"], c["action"], c["state"]) for c in cancelled] == [(f"1_{i}", "cancelled", "CANCELLED")
                                                                       for i in range(11)]
    assert aws.json("alice", "status", "1")["counts"] == {"CANCELLED": 11}
