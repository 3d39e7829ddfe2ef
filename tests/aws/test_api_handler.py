"""The api Lambda handler, called directly (moto never runs handler code) with
real-shaped API Gateway REST proxy events, on moto DynamoDB tables and SQS
queues built from the synthesized data stack: every route, and
every command refused to a caller who may not run it, with the tables
unchanged."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.adapters.aws.resources import QueueUrls
from gqa.adapters.aws.sqs_intake import parse_submission
from gqa.adapters.aws.tables import TABLES, TableNames
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.adapters.clock import SystemClock
from gqa.models.job import JobState
from gqa.ports import Change, Inventory
from gqa.scheduling import Gpu, Policy, TeamPolicy
from gqa.services.submit import SubmitService
from gqa.services.triggers import TriggerService
from tests.aws.api_gateway import ACCOUNT, rest_event, user_arn
from tests.aws.deployed import create_queues, create_tables
from tests.aws.moto_support import LambdaContext, capture, refuse, session
from tests.builders import spec
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
NAMES = TableNames.prefixed("gqa-api-")
INVENTORY = Inventory(gpus=tuple(Gpu(i, "a10g", 1.0) for i in range(4)))
ACCESS = {"admins": [user_arn("root-ops")], "approvers": ["carol"], "identity_roles": ["AWSReservedSSO_*"]}
CONTEXT = LambdaContext(function_name="gqa-api")
CHECKPOINTS, MANIFESTS = "gqa-api-checkpoints", "gqa-api-manifests"
# the deployment's trigger buckets; the checkpoint bucket listed by mistake is refused all the same
TRIGGER_BUCKETS = ["data", {"name": "curated", "prefixes": ["ready/", "late/"]}, CHECKPOINTS]


@dataclass
class Api:
    module: Any
    store: DynamoDBStore
    urls: QueueUrls

    def __call__(self, method: str, path: str, who: str | None = "alice", *, body: Any = None,
                 query: dict | None = None, arn: str | None = None) -> tuple[int, dict]:
        event = rest_event(method, path, arn=arn or (user_arn(who) if who else None), body=body, query=query)
        answer = self.module.handler(event, CONTEXT)
        return answer["statusCode"], json.loads(answer["body"])

    def job(self, owner: str = "alice", **overrides) -> str:
        """A job written as admission would (no API call)."""
        [job] = SubmitService(self.store, SystemClock()).submit(spec(**overrides), owner=owner)
        return job.id

    def running(self, owner: str = "alice") -> str:
        job_id = self.job(owner)
        self.store.apply([Change(job_id, JobState.QUEUED, JobState.STARTING, "test", 1.0, {"assigned": (0,)})])
        self.store.apply([Change(job_id, JobState.STARTING, JobState.RUNNING, "test", 2.0,
                                 {"attempts": 1, "started_at": 2.0})])
        return job_id

    def trigger(self, owner: str = "alice", **env: str) -> str:
        """A trigger added as the API would, its job's env `env`."""
        return self.triggers.add("data", "in/", spec(env=env).model_dump_json(), owner, 120).id

    @property
    def triggers(self) -> TriggerService:
        return TriggerService(DynamoDBTriggerStore(session().client("dynamodb"), NAMES), SystemClock())

    def messages(self, tier: int = 1) -> list[dict]:
        out = session().client("sqs").receive_message(QueueUrl=self.urls.intake[tier], MaxNumberOfMessages=10,
                                                      WaitTimeSeconds=0)
        return out.get("Messages", [])

    def tables(self) -> dict[str, list]:
        """Every item of every table: what a refused command must leave as it was."""
        client = session().client("dynamodb")
        return {t.logical: sorted((json.dumps(i, sort_keys=True) for i in
                                   client.scan(TableName=NAMES.of(t))["Items"]))
                for t in TABLES}


@pytest.fixture
def api():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        urls = create_queues(session().client("sqs"), prefix="gqa-api-")
        env = {"GQA_JOBS_TABLE": NAMES.jobs, "GQA_SETTINGS_TABLE": NAMES.settings, "GQA_LEDGER_TABLE": NAMES.ledger,
               "GQA_INTAKE_URLS": json.dumps({"high": urls.intake[0], "normal": urls.intake[1],
                                              "low": urls.intake[2]}),
               "GQA_WAKEUP_QUEUE_URL": urls.wakeup, "GQA_ACCESS": json.dumps(ACCESS),
               "GQA_CHECKPOINT_BUCKET": CHECKPOINTS, "GQA_MANIFEST_BUCKET": MANIFESTS,
               "GQA_TRIGGER_BUCKETS": json.dumps(TRIGGER_BUCKETS),
               "GQA_POOLS": json.dumps([{"gpu_type": "a10g", "spot": True, "max_gpus": 4, "price": 0.5}])}
        with mock.patch.dict(os.environ, env):
            from lambdas import api as module
            module.container.cache_clear()      # a fresh "container" per test: its clients are moto's
            store = DynamoDBStore(session().client("dynamodb"), NAMES)
            store.set_inventory(INVENTORY)
            yield Api(module, store, urls)
            module.container.cache_clear()


# -- who is calling ------------------------------------------------------------------------------

@pytest.mark.parametrize("arn, owner, roles", [
    (user_arn("alice"), "alice", ["owner"]),
    (user_arn("carol"), "carol", ["owner", "approver"]),
    (user_arn("root-ops"), "root-ops", ["owner", "admin"]),
    (f"arn:aws:sts::{ACCOUNT}:assumed-role/Researcher/carol", "Researcher/carol", ["owner"]),
    (f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_ML_1a2b/carol", "carol", ["owner", "approver"]),
])
def test_whoami(api, arn, owner, roles):
    status, me = api("GET", "/whoami", arn=arn)
    assert status == 200 and me == {"owner": owner, "arn": arn, "account": ACCOUNT, "roles": roles}


@pytest.mark.parametrize("method, path", [
    ("GET", "/whoami"), ("POST", "/jobs"), ("GET", "/jobs/1"), ("GET", "/queue"), ("POST", "/jobs/1/cancel"),
    ("POST", "/jobs/1/requeue"), ("POST", "/jobs/1/hold"), ("POST", "/jobs/1/release"), ("POST", "/jobs/1/update"),
    ("POST", "/jobs/1/approve"), ("POST", "/jobs/1/deny"), ("GET", "/quota"),
    ("PUT", "/quota/teams/vision"), ("PUT", "/quota/policy"), ("GET", "/cost"), ("GET", "/jobs/1/logs"),
    ("POST", "/triggers"), ("GET", "/triggers"), ("DELETE", "/triggers/tr-0001"),
])
def test_a_caller_without_an_iam_identity_gets_401(api, method, path):
    api.job()
    before = api.tables()
    status, answer = api(method, path, who=None, body={"spec": {"command": ["true"]}})
    assert status == 401 and answer["error"] == "NotAuthenticated" and "SigV4" in answer["message"]
    assert api.tables() == before and api.messages() == []


def test_an_unknown_route_is_404(api):
    status, answer = api("GET", "/jobz")
    assert status == 404 and answer == {"error": "NotFound", "message": "no such API route: GET /jobz"}


# -- submit ----------------------------------------------------------------------------------------

def test_submit_answers_with_the_ids_and_queues_the_submission_for_admission(api):
    body = {"spec": spec(owner="mallory", array="0-2").model_dump(mode="json"), "environment": None}
    status, answer = api("POST", "/jobs", "alice", body=body)
    assert status == 202
    assert (answer["group"], answer["count"], answer["first_id"], answer["last_id"]) == ("1", 3, "1_0", "1_2")
    assert answer["runs"] == [[0, 2, 1]]
    assert "records" not in answer and "jobs" not in answer                # a range, not 6 MB of records
    assert (answer["first"]["state"], answer["first"]["owner"]) == ("SUBMITTED", "alice")   # the signature's
    [message] = api.messages()
    submission = parse_submission(message["Body"])
    assert (submission.owner, submission.job_ids, submission.tier) == ("alice", ("1_0", "1_1", "1_2"), 1)
    assert api.store.list() == []                                          # the admit function writes the jobs


def test_a_high_priority_submission_goes_to_the_high_intake_queue(api):
    status, _ = api("POST", "/jobs", body={"spec": spec(priority="high").model_dump(mode="json")})
    assert status == 202 and len(api.messages(tier=0)) == 1 and api.messages(tier=1) == []


@pytest.mark.parametrize("body, status, error, words", [
    ("not json", 400, "SpecError", "not JSON"),
    ({"command": ["true"]}, 400, "SpecError", '{"spec": {...}'),
    ({"spec": {"command": ["true"], "gpus": 2}}, 400, "SpecError", "unknown field 'gpus'"),
    ({"spec": {"command": ["true"]}, "environment": {"A": 1}}, 400, "SpecError", "environment must be"),
    ({"spec": spec(resources={"gpus": 64}).model_dump(mode="json")}, 422, "Rejected", "64 GPUs"),
])
def test_a_bad_submission_is_refused_and_nothing_is_queued(api, body, status, error, words):
    got, answer = api("POST", "/jobs", body=body)
    assert (got, answer["error"]) == (status, error) and words in answer["message"]
    assert api.messages() == []


# -- reading -------------------------------------------------------------------------------------

def test_status_of_a_job_and_of_a_group(api):
    job_id = api.job(name="bert")
    status, answer = api("GET", f"/jobs/{job_id}", "bob")                 # anyone may read
    [job] = answer["jobs"]
    assert status == 200 and (job["id"], job["name"], job["state"]) == (job_id, "bert", "QUEUED")
    assert [t["state"] for t in job["history"]] == ["SUBMITTED", "QUEUED"]
    assert "spec_json" not in job


def test_status_without_history_leaves_the_transitions_out_and_is_kept_apart(api):
    [first, *_] = SubmitService(api.store, SystemClock()).submit(spec(array="0-2"), owner="alice")
    group = first.group
    status, bare = api("GET", f"/jobs/{group}", "bob", query={"history": "false", "limit": "2"})
    assert status == 200 and [j["history"] for j in bare["jobs"]] == [[], []]
    # the next page keeps reading without them; a listing kept with them is not served for it, nor the reverse
    status, rest = api("GET", f"/jobs/{group}", "bob", query={"history": "false", "next": bare["next"]})
    assert [j["id"] for j in rest["jobs"]] == [f"{group}_2"] and rest["jobs"][0]["history"] == []
    status, whole = api("GET", f"/jobs/{group}", "bob", query={"next": bare["next"]})
    assert [len(j["history"]) for j in whole["jobs"]] == [2]
    status, answer = api("GET", f"/jobs/{group}", "bob", query={"history": "maybe"})
    assert status == 400 and "history must be true or false, got 'maybe'" in answer["message"]


def test_status_of_an_unknown_job_is_404(api):
    status, answer = api("GET", "/jobs/99")
    assert status == 404 and answer["error"] == "NotFound"


def test_status_between_accepting_and_admitting_says_the_job_waits_for_admission(api):
    _, submitted = api("POST", "/jobs", body={"spec": spec(array="0-1").model_dump(mode="json")})
    for ref in ("1", "1_1"):
        status, answer = api("GET", f"/jobs/{ref}", "bob")
        assert (status, answer["error"]) == (404, "NotAdmitted")
        assert answer["message"].startswith(f"job {ref} was accepted and is waiting for admission")
    status, answer = api("GET", "/jobs/1/logs", "alice")       # a follower waits for it (a NotStarted)
    assert (status, answer["error"]) == (404, "NotAdmitted")
    status, answer = api("GET", "/jobs/2")                     # never handed out
    assert (status, answer["error"]) == (404, "NotFound")

    [message] = api.messages()
    SubmitService(api.store, SystemClock()).admit(parse_submission(message["Body"]))
    calls = capture(api.module.container().store.client)
    status, answer = api("GET", "/jobs/1_1", "bob")
    assert status == 200 and [j["id"] for j in answer["jobs"]] == ["1_1"]
    # a recorded job costs the one read it did: the id counter is asked only when nothing is found
    assert [(c["_operation"], c["TableName"]) for c in calls] == [("Query", NAMES.jobs)]


def test_queue_shows_positions_reasons_and_factors(api):
    first, second = api.job(priority="high"), api.job(priority="low")
    status, view = api("GET", "/queue", "bob")
    assert status == 200 and (view["total_gpus"], view["free_gpus"]) == (4, 4)
    assert [(e["job"]["id"], e["position"]) for e in view["pending"]] == [(first, 1), (second, 2)]
    assert view["pending"][0]["reason"] == "starting now" and view["pending"][0]["factors"]["score"] >= 0
    _, lean = api("GET", "/queue", query={"explain": "false"})
    assert lean["pending"][0]["factors"] is None
    status, answer = api("GET", "/queue", query={"explain": "maybe"})
    assert status == 400 and "explain must be true or false" in answer["message"]


def test_cost_and_quota_are_for_everyone_to_read(api):
    api.store.set_team("vision", TeamPolicy(budget=500.0))
    status, cost = api("GET", "/cost", "bob", query={"team": "vision"})
    assert status == 200 and cost["teams"] == [{"team": "vision", "settled": 0.0, "running": 0.0, "budget": 500.0}]
    assert (cost["gpu_hours"], cost["jobs"]) == ({"vision": 0.0}, [])
    status, answer = api("GET", "/cost", query={"period": "2026-13"})
    assert status == 400 and "calendar month" in answer["message"]
    for jobs, said in (("x", "jobs must be a whole number"), ("5000", "0 to 1000 of the costliest")):
        status, answer = api("GET", "/cost", query={"jobs": jobs})
        assert status == 400 and said in answer["message"]
    status, quota = api("GET", "/quota", "bob")
    assert status == 200 and quota["teams"][0]["team"] == "vision" and "weights" in quota["policy"]


# -- changing jobs ---------------------------------------------------------------------------------

def test_owners_cancel_their_own_jobs(api):
    first, second = api.job(), api.job()
    status, answer = api("POST", f"/jobs/{first},{second}/cancel", "alice")
    assert status == 200 and [r["action"] for r in answer["results"]] == ["cancelled", "cancelled"]
    assert api.store.get(first).state == JobState.CANCELLED


def test_admins_cancel_and_requeue_anyones_jobs(api):
    queued, running = api.job("alice"), api.running("alice")
    assert api("POST", f"/jobs/{queued}/cancel", "root-ops")[0] == 200
    status, answer = api("POST", f"/jobs/{running}/requeue", "root-ops")
    assert status == 200 and answer["results"][0]["action"] == "requeueing"


def test_requeueing_a_job_that_ended_is_a_conflict(api):
    job_id = api.job()
    api("POST", f"/jobs/{job_id}/cancel", "alice")
    status, answer = api("POST", f"/jobs/{job_id}/requeue", "alice")
    assert status == 409 and answer["error"] == "InvalidTransition"


def test_approvers_approve_and_deny(api):
    api.store.set_policy(Policy(approval_gpus=2))
    big, other = api.job("bob", resources={"gpus": 4}), api.job("bob", resources={"gpus": 4})
    assert api.store.get(big).state == JobState.PENDING_APPROVAL
    status, answer = api("POST", f"/jobs/{big}/approve", "carol")
    assert status == 200 and answer["results"][0]["action"] == "approved"
    assert api.store.get(big).state == JobState.QUEUED and "approved by carol" in api.store.get(big).reason
    status, answer = api("POST", f"/jobs/{other}/deny", "root-ops", body={"reason": "too big for now"})
    assert status == 200 and api.store.get(other).reason == "denied by root-ops: too big for now"


def test_admins_set_quotas_and_the_policy(api):
    status, answer = api("PUT", "/quota/teams/vision", "root-ops", body={"share": 2, "max_gpus": 8})
    assert status == 200 and answer["policy"]["share"] == 2.0 and api.store.teams()["vision"].max_gpus == 8
    status, answer = api("PUT", "/quota/policy", "root-ops", body={"max_gpus_per_job": 2, "preempt_tiers": [2]})
    assert status == 200 and answer["max_gpus_per_job"] == 2 and api.store.policy().preempt_tiers == (2,)
    # each change wakes the dispatcher: a raised cap or budget starts what it held now, not at the next tick
    wakes = [json.loads(m["Body"]) for m in session().client("sqs").receive_message(
        QueueUrl=api.urls.wakeup, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])]
    assert wakes == [{"wake": True}] * 2


@pytest.mark.parametrize("path, body, words", [
    ("/quota/teams/vision", {"share": -1}, "share must be positive"),
    ("/quota/teams/vision", {"share": "lots"}, "share must be a number"),
    ("/quota/teams/vi%20sion", {"share": 1}, "not a valid team name"),
    ("/quota/policy", {"weights": 1}, "unknown field(s) weights"),
])
def test_bad_quota_changes_are_400_and_change_nothing(api, path, body, words):
    before = api.tables()
    status, answer = api("PUT", path, "root-ops", body=body)
    assert status == 400 and words in answer["message"] and api.tables() == before


# -- triggers ------------------------------------------------------------------------------------

TRIGGER = {"bucket": "data", "prefix": "incoming/", "suffix": ".parquet", "debounce": "5m"}


def test_a_trigger_added_is_the_callers_and_listed_for_everyone(api):
    job = spec(owner="mallory", env={"TOKEN": "s3cret"}).model_dump(mode="json")
    status, added = api("POST", "/triggers", "alice", body={**TRIGGER, "spec": job})
    assert status == 201 and added["id"].startswith("tr-")
    assert (added["owner"], added["debounce"], added["suffix"]) == ("alice", 300, ".parquet")   # the signature's
    assert json.loads(added["spec_json"])["env"] == {"TOKEN": "s3cret"}
    [stored] = api.triggers.list()
    # the verified ARN is kept, for the trigger function to judge the owner again; no answer shows it
    assert (stored.id, stored.owner_arn) == (added["id"], user_arn("alice"))
    status, listed = api("GET", "/triggers", "bob")
    assert status == 200 and [t["id"] for t in listed["triggers"]] == [added["id"]]
    assert "owner_arn" not in added and "owner_arn" not in listed["triggers"][0]
    assert "env" not in json.loads(listed["triggers"][0]["spec_json"])        # not bob's: no env
    for who in ("alice", "root-ops"):                                          # the owner's and admins': all of it
        _, listed = api("GET", "/triggers", who)
        assert json.loads(listed["triggers"][0]["spec_json"])["env"] == {"TOKEN": "s3cret"}


def test_triggers_are_listed_by_owner(api):
    mine, theirs = api.trigger("alice"), api.trigger("bob")
    _, listed = api("GET", "/triggers", query={"owner": "bob"})
    assert [t["id"] for t in listed["triggers"]] == [theirs]
    _, listed = api("GET", "/triggers")
    assert {t["id"] for t in listed["triggers"]} == {mine, theirs}


def test_owners_remove_their_triggers_and_admins_anyones(api):
    mine, theirs = api.trigger("alice"), api.trigger("bob")
    status, removed = api("DELETE", f"/triggers/{mine}", "alice")
    assert status == 200 and removed["id"] == mine
    status, removed = api("DELETE", f"/triggers/{theirs}", "root-ops")
    assert status == 200 and removed["owner"] == "bob" and api.triggers.list() == []
    status, answer = api("DELETE", f"/triggers/{mine}", "alice")
    assert status == 404 and answer == {"error": "NotFound", "message": f"no trigger {mine}"}


@pytest.mark.parametrize("body, words", [
    ({**TRIGGER}, '"spec": {...}'),
    ({**TRIGGER, "spec": {"command": ["true"]}, "bukket": "x"}, "unknown field(s) bukket"),
    ({**TRIGGER, "spec": {"command": ["true"]}, "bucket": 7}, "bucket and prefix must be strings"),
    ({**TRIGGER, "spec": {"command": ["true"]}, "bucket": "Data"}, "'Data' is not an S3 bucket name"),
    ({**TRIGGER, "spec": {"command": ["true"]}, "suffix": 1}, "suffix must be a string"),
    ({**TRIGGER, "spec": {"command": ["true"]}, "debounce": "1h"}, "the debounce window must be 1s to 15m00s"),
    ({**TRIGGER, "spec": {"command": ["true"]}, "debounce": True}, "debounce must be seconds"),
    ({**TRIGGER, "spec": {"command": ["true"], "gpu": 2}}, "unknown field 'gpu'"),
])
def test_a_bad_trigger_is_400_and_adds_nothing(api, body, words):
    status, answer = api("POST", "/triggers", body=body)
    assert (status, answer["error"]) == (400, "SpecError") and words in answer["message"], answer
    assert api.triggers.list() == []


@pytest.mark.parametrize("bucket, prefix, words", [
    (CHECKPOINTS, "", f"s3://{CHECKPOINTS} holds the jobs' checkpoints, which gqa's jobs write"),
    (CHECKPOINTS, "checkpoints/", f"s3://{CHECKPOINTS} holds the jobs' checkpoints"),
    (CHECKPOINTS, "incoming/", f"s3://{CHECKPOINTS} holds the jobs' checkpoints"),
    (MANIFESTS, "", f"s3://{MANIFESTS} holds the trigger manifests"),
    ("data", "gqa-trigger-manifests/tr-1/", "keys under gqa-trigger-manifests/ are gqa's own trigger manifests"),
    ("other-bucket", "incoming/", "'other-bucket' is not one of this deployment's 3 trigger bucket(s) (data, "
                                  "curated, gqa-api-checkpoints): its new objects send no events to gqa"),
    ("curated", "", "in curated, triggers may watch only under 2 prefix(es): 'ready/', 'late/'; '' is not under one"),
    ("curated", "read", "in curated, triggers may watch only under 2 prefix(es)"),
])
def test_a_trigger_where_the_deployment_allows_none_is_400_and_writes_nothing(api, bucket, prefix, words):
    before = api.tables()
    status, answer = api("POST", "/triggers", "root-ops", body={**TRIGGER, "bucket": bucket, "prefix": prefix,
                                                                "spec": {"command": ["true"]}})
    assert (status, answer["error"]) == (400, "SpecError") and words in answer["message"], answer
    assert api.tables() == before


@pytest.mark.parametrize("bucket, prefix", [("data", ""), ("curated", "ready/"), ("curated", "late/2026/")])
def test_a_trigger_under_an_allowed_prefix_is_added(api, bucket, prefix):
    status, added = api("POST", "/triggers", body={**TRIGGER, "bucket": bucket, "prefix": prefix,
                                                   "spec": {"command": ["true"]}})
    assert status == 201 and (added["bucket"], added["prefix"]) == (bucket, prefix)


@pytest.mark.parametrize("value, status, words", [
    (None, 400, "this deployment lists no trigger buckets (triggers.buckets in its deployment file)"),
    ("[\"data\"", 500, "the gqa API failed on this request"),                  # malformed: the function's fault
    (json.dumps([{"name": "data", "prefix": "x/"}]), 500, "the gqa API failed on this request"),
])
def test_without_trigger_buckets_no_trigger_is_added(api, value, status, words):
    with mock.patch.dict(os.environ):
        os.environ.pop("GQA_TRIGGER_BUCKETS")
        if value is not None:
            os.environ["GQA_TRIGGER_BUCKETS"] = value
        answer_status, answer = api("POST", "/triggers", body={**TRIGGER, "spec": {"command": ["true"]}})
    assert answer_status == status and words in answer["message"], answer
    assert api.triggers.list() == []


# -- logs ------------------------------------------------------------------------------------------

def test_the_logs_of_a_job_not_started_are_not_started_and_of_an_unknown_one_not_found(api):
    job_id = api.job("alice")
    status, answer = api("GET", f"/jobs/{job_id}/logs", "alice")
    assert (status, answer["error"]) == (404, "NotStarted") and "has not started yet" in answer["message"]
    status, answer = api("GET", "/jobs/77/logs", "root-ops")
    assert (status, answer["error"]) == (404, "NotFound")


@pytest.mark.parametrize("query, words", [
    ({"attempt": "first"}, "attempt must be a whole number"),
    ({"attempt": "0"}, "attempts are numbered from 1"),
    ({"limit": "0"}, "a log page holds 1 to 10000 lines"),
    ({"token": "garbage!"}, "not a log token gqa gave out"),
])
def test_bad_log_requests_are_400(api, query, words):
    job_id = api.running("alice")
    status, answer = api("GET", f"/jobs/{job_id}/logs", "alice", query=query)
    assert (status, answer["error"]) == (400, "SpecError") and words in answer["message"], answer


# -- every command refused to whoever may not run it -------------------------------------------------

REFUSED = [
    # (caller, method, path template, body): {q} a queued job of alice's, {r} a running one, {p} one awaiting approval
    ("bob", "POST", "/jobs/{q}/cancel", None),
    ("carol", "POST", "/jobs/{q}/cancel", None),                  # approvers cancel only their own
    ("bob", "POST", "/jobs/{r}/cancel", None),
    ("bob", "POST", "/jobs/{q},{r}/cancel", None),
    ("bob", "POST", "/jobs/{r}/requeue", None),
    ("carol", "POST", "/jobs/{r}/requeue", None),
    ("alice", "POST", "/jobs/{p}/approve", None),                 # not even one's own
    ("bob", "POST", "/jobs/{p}/approve", None),
    ("alice", "POST", "/jobs/{p}/deny", {"reason": "no"}),
    ("bob", "PUT", "/quota/teams/vision", {"max_gpus": 100}),
    ("carol", "PUT", "/quota/teams/vision", {"max_gpus": 100}),
    ("alice", "PUT", "/quota/policy", {"approval_gpus": -1}),
    ("carol", "PUT", "/quota/policy", {"approval_gpus": -1}),
    ("bob", "GET", "/jobs/{r}/logs", None),                       # output may hold secrets
    ("carol", "GET", "/jobs/{r}/logs", None),                     # approvers judge size, not output
    ("bob", "GET", "/jobs/{q}/logs", None),                       # refused before "not started yet"
    ("bob", "DELETE", "/triggers/{t}", None),
    ("carol", "DELETE", "/triggers/{t}", None),
]


@pytest.mark.parametrize("who, method, template, body", REFUSED,
                         ids=[f"{w}-{m}-{t}" for w, m, t, _ in REFUSED])
def test_every_command_by_a_caller_who_may_not_is_refused_and_changes_nothing(api, who, method, template, body):
    api.store.set_policy(Policy(approval_gpus=2))
    jobs = {"q": api.job("alice"), "r": api.running("alice"), "p": api.job("alice", resources={"gpus": 4}),
            "t": api.trigger("alice")}
    before = api.tables()
    status, answer = api(method, template.format(**jobs), who, body=body)
    assert status == 403 and answer["error"] == "NotPermitted" and who in answer["message"]
    assert api.tables() == before
    assert api.messages() == []


def test_a_refusal_says_whose_job_it_is_and_who_may(api):
    job_id = api.job("alice")
    _, answer = api("POST", f"/jobs/{job_id}/cancel", "bob")
    assert answer["message"] == (f"job {job_id} belongs to alice; bob may not cancel it "
                                 "(owners cancel their own jobs; admins may cancel any)")


def test_a_session_of_an_ordinary_role_cannot_act_as_the_user_of_that_name(api):
    job_id = api.job("alice")
    status, _ = api("POST", f"/jobs/{job_id}/cancel", arn=f"arn:aws:sts::{ACCOUNT}:assumed-role/Researcher/alice")
    assert status == 403 and api.store.get(job_id).state == JobState.QUEUED


# -- the backend failing -------------------------------------------------------------------------------

def test_dynamodb_throttling_past_the_retries_is_503(api):
    job_id = api.job()
    api.module.container().store.call.sleep = lambda _: None
    refuse(api.module.container().store.client, "*", "ProvisionedThroughputExceededException", times=10)
    status, answer = api("GET", f"/jobs/{job_id}")
    assert status == 503 and answer["error"] == "BackendUnavailable"


# -- long listings, in pages ----------------------------------------------------------------------

def read_all(api, path: str, **query: str) -> list[dict]:
    pages, token = [], None
    while True:
        status, page = api("GET", path, "bob", query={**query, **({"next": token} if token else {})})
        assert status == 200, page
        pages.append(page)
        token = page["next"]
        if token is None:
            return pages


def test_the_queue_past_one_page_is_read_in_pages_that_add_up_to_the_whole(api):
    ids = [api.job(priority=p, resources={"gpus": g}) for p, g in
           [("low", 1), ("high", 2), ("normal", 4), ("low", 2), ("high", 1), ("normal", 1), ("low", 4)]]
    _, whole = api("GET", "/queue")
    assert whole["next"] is None and len(whole["pending"]) == len(ids)
    pages = read_all(api, "/queue", limit="3")
    assert [len(p["pending"]) for p in pages] == [3, 3, 1]
    assert all((p["total_gpus"], p["free_gpus"], p["weights"]) == (4, 4, whole["weights"]) for p in pages)
    assert [p["running"] is None for p in pages] == [False, True, True]
    entries = sorted((e for p in pages for e in p["pending"]), key=lambda e: e["rank"])
    told = lambda e: (e["job"]["id"], e["position"], e["reason"], e["factors"] is not None)   # noqa: E731
    assert [told(e) for e in entries] == [told(e) for e in whole["pending"]]   # positions of the whole queue
    assert [e["position"] for e in entries] == list(range(1, len(ids) + 1))


def test_a_group_past_one_page_is_read_in_pages(api):
    SubmitService(api.store, SystemClock()).submit(spec(array="0-4"), owner="alice")
    pages = read_all(api, "/jobs/1", limit="2")
    assert [[j["id"] for j in p["jobs"]] for p in pages] == [["1_0", "1_1"], ["1_2", "1_3"], ["1_4"]]


@pytest.mark.parametrize("path, query, words", [
    ("/queue", {"next": "bogus"}, "not a page token"),
    ("/jobs/1", {"next": "bogus"}, "not a page token"),
    ("/queue", {"limit": "0"}, "limit must be between 1 and 1000"),
    ("/jobs/1", {"limit": "5000"}, "limit must be between 1 and 1000"),
    ("/queue", {"limit": "ten"}, "limit must be a whole number"),
])
def test_a_bad_page_token_or_limit_is_400(api, path, query, words):
    api.job()
    status, answer = api("GET", path, query=query)
    assert (status, answer["error"]) == (400, "SpecError") and words in answer["message"]


def test_a_token_of_the_queue_is_refused_by_a_group_listing(api):
    SubmitService(api.store, SystemClock()).submit(spec(array="0-2"), owner="alice")
    _, page = api("GET", "/queue", query={"limit": "1"})
    status, answer = api("GET", "/jobs/1", query={"next": page["next"]})
    assert status == 400 and "not a page token of this jobs listing" in answer["message"]


# -- teams are rights ----------------------------------------------------------------------------

VISION_ROLE = f"arn:aws:sts::{ACCOUNT}:assumed-role/VisionResearcher/*"


def _members(api: Api) -> None:
    """As a deploy writes them: with the teams' items (tests/infra/test_settings_registration.py)."""
    api.store.set_team_members("vision", ("alice", VISION_ROLE))
    api.store.set_team_members("nlp", ("bob",))


def test_a_submission_for_a_team_the_caller_is_not_in_is_403_and_nothing_is_written(api):
    _members(api)
    before = api.tables()
    status, answer = api("POST", "/jobs", "bob", body={"spec": spec(team="vision").model_dump(mode="json")})
    assert (status, answer["error"]) == (403, "NotPermitted")
    assert answer["message"] == (f"bob is not a member of team vision (members: alice, {VISION_ROLE}); "
                                 "your teams: nlp; ask an admin to add you")
    assert api.messages() == [] and api.tables() == before                  # no ids reserved, nothing queued


@pytest.mark.parametrize("who, arn, named, team", [
    ("alice", None, "vision", "vision"),
    (None, f"arn:aws:sts::{ACCOUNT}:assumed-role/VisionResearcher/dana", "default", "vision"),   # its only team
    ("bob", None, "default", "nlp"),
    ("root-ops", None, "nlp", "nlp"),                                                            # admins: any team
    ("erin", None, "default", "default"),                                                        # in no team
])
def test_a_submission_runs_for_the_callers_team(api, who, arn, named, team):
    _members(api)
    status, answer = api("POST", "/jobs", who, arn=arn, body={"spec": spec(team=named).model_dump(mode="json")})
    assert status == 202, answer
    [message] = api.messages()
    assert json.loads(parse_submission(message["Body"]).spec_json)["team"] == team


def test_a_trigger_for_a_team_its_owner_is_not_in_is_403_and_adds_nothing(api):
    _members(api)
    body = {"bucket": "data", "prefix": "in/", "spec": spec(team="vision").model_dump(mode="json")}
    status, answer = api("POST", "/triggers", "bob", body=body)
    assert (status, answer["error"]) == (403, "NotPermitted") and "not a member of team vision" in answer["message"]
    assert api.triggers.list() == []
    status, added = api("POST", "/triggers", "bob", body={**body, "spec": spec().model_dump(mode="json")})
    assert status == 201 and json.loads(api.triggers.get(added["id"]).spec_json)["team"] == "nlp"   # kept resolved


def test_admins_set_a_teams_members_and_others_may_not(api):
    status, answer = api("PUT", "/quota/teams/vision/members", "root-ops", body={"members": ["alice", "@ml"]})
    assert (status, answer) == (200, {"team": "vision", "members": ["alice", "@ml"]})
    assert api.store.team_members() == {"vision": ("alice", "@ml")}
    before = api.tables()
    status, answer = api("PUT", "/quota/teams/vision/members", "bob", body={"members": ["bob"]})
    assert (status, answer["error"]) == (403, "NotPermitted") and api.tables() == before
    status, answer = api("PUT", "/quota/teams/vision/members", "root-ops", body={"members": ["a b"]})
    assert (status, answer["error"]) == (400, "SpecError") and "'a b' is not a member" in answer["message"]
