"""`gqa trigger add|list|remove`: refused on the local backend; against AWS,
through the API (signed requests, the fake API Gateway, the api function on
moto), with the caller's IAM identity as the owner and refusals by role
(fake_batch.ACCESS: root-ops is an admin, carol an approver)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.aws.api_gateway import ENDPOINT
from tests.aws.fake_batch import BUCKET

JOB = "name: retrain\nteam: vision\ncommand: [python, retrain.py]\nresources:\n  gpus: 2\n"


def test_the_local_backend_refuses_triggers_and_says_how_to_reach_aws(cli):
    (cli.home / "job.yaml").write_text(JOB)
    for args in (("add", "--bucket", "data", "--prefix", "in/", "--job", "job.yaml"), ("list",),
                 ("remove", "tr-0001")):
        code, out, err = cli("trigger", *args)
        assert code == 2 and out == ""
        assert "run on the AWS backend only" in err and "gqa config set backend aws" in err


@pytest.fixture
def triggers(aws):
    """The AWS backend over the fake API Gateway (conftest's `aws`), with a job file
    for team vision, whose members are the users who add triggers here."""
    Path("retrain.yaml").write_text(JOB)     # the working directory is the test's own
    code, _, err = aws("root-ops", "quota", "set", "vision", "--members", "alice,bob,dave")
    assert code == 0, err
    return aws


def test_a_trigger_for_a_team_its_owner_is_not_in_is_refused(triggers):
    code, out, err = triggers("carol", "trigger", "add", "--bucket", "data", "--prefix", "in/", "--job", "retrain.yaml")
    assert code == 2 and out == ""
    assert "carol is not a member of team vision (members: alice, bob, dave)" in err
    assert triggers.json("root-ops", "trigger", "list")["triggers"] == []


def test_add_list_and_remove(triggers):
    code, out, err = triggers("alice", "trigger", "add", "--bucket", "data", "--prefix", "incoming/",
                              "--suffix", ".parquet", "--job", "retrain.yaml", "--debounce", "5m")
    assert code == 0, err
    trigger_id = out.strip()
    assert trigger_id.startswith("tr-")
    assert "watching s3://data/incoming/*.parquet" in err and "within 5m00s" in err
    sent = triggers.gateway.seen[-1]
    assert (sent["method"], sent["url"]) == ("POST", f"{ENDPOINT}/triggers")

    [listed] = triggers.json("dave", "trigger", "list")["triggers"]
    assert listed["id"] == trigger_id and listed["owner"] == "alice" and listed["debounce"] == 300
    assert (listed["bucket"], listed["prefix"], listed["suffix"], listed["job"]) == (
        "data", "incoming/", ".parquet", "retrain")
    code, out, _ = triggers("dave", "trigger", "list")
    assert trigger_id in out and "s3://data/incoming/*.parquet" in out and "retrain" in out

    removed = triggers.json("alice", "trigger", "remove", trigger_id)
    assert removed["action"] == "removed" and removed["id"] == trigger_id
    assert triggers.json("alice", "trigger", "list") == {"triggers": []}


def test_the_owner_is_the_callers_iam_identity_not_the_job_files(triggers):
    Path("mallory.yaml").write_text(JOB.replace("team: vision\n", "team: vision\nowner: mallory\n"))
    data = triggers.json("alice", "trigger", "add", "--bucket", "data", "--prefix", "", "--job", "mallory.yaml")
    assert data["owner"] == "alice" and data["debounce"] == 120 and data["prefix"] == "" and data["suffix"] is None
    assert '"gpus":2' in data["spec_json"].replace(" ", "")


def test_a_triggers_job_env_is_shown_to_its_owner_and_admins_only(triggers):
    Path("secret.yaml").write_text(JOB + "env:\n  TOKEN: s3cret\n")
    triggers.json("alice", "trigger", "add", "--bucket", "data", "--prefix", "in/", "--job", "secret.yaml")
    for who, shown in (("alice", True), ("root-ops", True), ("dave", False)):
        [listed] = triggers.json(who, "trigger", "list")["triggers"]
        assert ("s3cret" in listed["spec_json"]) is shown, who


def test_only_the_owner_or_an_admin_may_remove(triggers):
    first = triggers.json("alice", "trigger", "add", "--bucket", "data", "--prefix", "a/", "--job", "retrain.yaml")
    second = triggers.json("alice", "trigger", "add", "--bucket", "data", "--prefix", "b/", "--job", "retrain.yaml")
    for who in ("mallory", "carol"):                     # carol approves jobs: no say over others' triggers
        code, _, err = triggers(who, "trigger", "remove", first["id"])
        assert code == 2 and (f"trigger {first['id']} belongs to alice; {who} may not remove it "
                              "(owners remove their own triggers; admins may remove any)") in err
    assert len(triggers.json("alice", "trigger", "list")["triggers"]) == 2
    assert triggers.json("root-ops", "trigger", "remove", second["id"])["owner"] == "alice"
    assert [t["id"] for t in triggers.json("alice", "trigger", "list")["triggers"]] == [first["id"]]


def test_list_mine_and_by_owner(triggers):
    triggers("alice", "trigger", "add", "--bucket", "data", "--prefix", "a/", "--job", "retrain.yaml")
    triggers("dave", "trigger", "add", "--bucket", "data", "--prefix", "b/", "--job", "retrain.yaml")
    assert [t["prefix"] for t in triggers.json("dave", "trigger", "list", "--mine")["triggers"]] == ["b/"]
    assert [t["owner"] for t in triggers.json("dave", "trigger", "list", "--owner", "alice")["triggers"]] == ["alice"]
    assert len(triggers.json("dave", "trigger", "list")["triggers"]) == 2


@pytest.mark.parametrize("args, problem", [
    (("--bucket", "Data", "--prefix", "in/", "--job", "retrain.yaml"), "'Data' is not an S3 bucket name"),  # the API's
    (("--bucket", "data", "--prefix", "in/", "--job", "retrain.yaml", "--debounce", "1h"),
     "the debounce window must be 1s to 15m00s"),
    (("--bucket", "data", "--prefix", "in/", "--job", "missing.yaml"), "no such file: missing.yaml"),
    (("--bucket", "data", "--prefix", "in/", "--job", "bad.yaml"), "bad.yaml:3: unknown field 'gpu'"),
])
def test_bad_input_is_refused_with_a_clear_message_and_nothing_is_added(triggers, args, problem):
    Path("bad.yaml").write_text("name: x\ncommand: [true]\ngpu: 2\n")
    code, out, err = triggers("alice", "trigger", "add", *args)
    assert code == 2 and out == "" and problem in err
    assert triggers.json("alice", "trigger", "list") == {"triggers": []}


def test_removing_an_unknown_trigger_is_an_error(triggers):
    code, _, err = triggers("alice", "trigger", "remove", "tr-ffff")
    assert code == 2 and "no trigger tr-ffff" in err


def stored_keys(triggers) -> list[str]:
    listed = triggers.world.client("s3").list_objects_v2(Bucket=BUCKET)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def test_add_uploads_the_jobs_directory_and_the_trigger_keeps_it_until_removed(triggers, tmp_path, monkeypatch):
    from gqa.models import code

    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    project = tmp_path / "retrain"
    project.mkdir()
    (project / "retrain.py").write_text("print('retraining')\n")
    (project / "retrain.yaml").write_text(JOB)
    monkeypatch.chdir(project)
    code_, out, err = triggers("alice", "trigger", "add", "--bucket", "data", "--prefix", "in/", "--job",
                               "retrain.yaml")
    assert code_ == 0, err
    assert f"code: {project}, 2 files" in err and "uploaded (sha256:" in err
    trigger_id = out.strip()
    [listed] = triggers.json("alice", "trigger", "list")["triggers"]
    digest = json.loads(listed["spec_json"])["code"]               # every burst's job runs this code
    assert stored_keys(triggers) == sorted([code.key_of(digest), code.trigger_key_of(trigger_id, digest)])

    triggers("alice", "trigger", "remove", trigger_id)
    assert stored_keys(triggers) == [code.key_of(digest)]         # the trigger's copy goes with it


def test_add_with_no_code_sends_none(triggers):
    data = triggers.json("alice", "trigger", "add", "--bucket", "data", "--prefix", "in/", "--job", "retrain.yaml",
                         "--no-code")
    assert json.loads(data["spec_json"])["code"] is None and stored_keys(triggers) == []
