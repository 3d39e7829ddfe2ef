"""`gqa trigger add|list|remove`: refused on the local backend; against AWS,
the CLI drives the real TriggerService on a moto settings table (the backend
object injected where the AWS backend's would be)."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from moto import mock_aws

from gqa.adapters.aws.tables import TableNames, create_tables
from gqa.adapters.aws.triggers import DynamoDBTriggerStore
from gqa.services.triggers import TriggerService
from tests.aws.moto_support import FakeClock, session
from tests.contract.conftest import FAKE_AWS

NAMES = TableNames.prefixed("gqa-cli-trig-")
JOB = "name: retrain\nteam: vision\ncommand: [python, retrain.py]\nresources:\n  gpus: 2\n"


def test_the_local_backend_refuses_triggers_and_says_how_to_reach_aws(cli):
    (cli.home / "job.yaml").write_text(JOB)
    for args in (("add", "--bucket", "data", "--prefix", "in/", "--job", "job.yaml"), ("list",),
                 ("remove", "tr-0001")):
        code, out, err = cli("trigger", *args)
        assert code == 2 and out == ""
        assert "run on the AWS backend only" in err and "gqa config set backend aws" in err


class AwsBackend:
    """The one method of the AWS backend these commands use."""

    def __init__(self, service: TriggerService):
        self.service = service

    def triggers(self) -> TriggerService:
        return self.service


@pytest.fixture
def aws(cli, monkeypatch):
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws():
        create_tables(session().client("dynamodb"), NAMES)
        service = TriggerService(DynamoDBTriggerStore(session().client("dynamodb"), NAMES), FakeClock())
        monkeypatch.setattr("cli.backend.backend", lambda: AwsBackend(service))
        monkeypatch.setenv("USER", "carol")
        monkeypatch.setattr("getpass.getuser", lambda: "carol")
        (cli.home / "retrain.yaml").write_text(JOB)
        yield cli


def test_add_list_and_remove(aws):
    code, out, err = aws("trigger", "add", "--bucket", "data", "--prefix", "incoming/", "--suffix", ".parquet",
                         "--job", "retrain.yaml", "--debounce", "5m")
    assert code == 0, err
    trigger_id = out.strip()
    assert trigger_id.startswith("tr-")
    assert "watching s3://data/incoming/*.parquet" in err and "within 5m00s" in err

    [listed] = aws.json("trigger", "list")["triggers"]
    assert listed["id"] == trigger_id and listed["owner"] == "carol" and listed["debounce"] == 300
    assert (listed["bucket"], listed["prefix"], listed["suffix"], listed["job"]) == (
        "data", "incoming/", ".parquet", "retrain")
    code, out, _ = aws("trigger", "list")
    assert trigger_id in out and "s3://data/incoming/*.parquet" in out and "retrain" in out

    removed = aws.json("trigger", "remove", trigger_id)
    assert removed["action"] == "removed" and removed["id"] == trigger_id
    assert aws.json("trigger", "list") == {"triggers": []}


def test_add_json_is_the_wire_form_with_the_validated_job(aws):
    data = aws.json("trigger", "add", "--bucket", "data", "--prefix", "", "--job", "retrain.yaml")
    assert data["debounce"] == 120 and data["prefix"] == "" and data["suffix"] is None
    assert '"gpus":2' in data["spec_json"].replace(" ", "")


def test_only_the_owner_may_remove(aws, monkeypatch):
    trigger_id = aws.json("trigger", "add", "--bucket", "data", "--prefix", "in/", "--job", "retrain.yaml")["id"]
    monkeypatch.setattr("getpass.getuser", lambda: "mallory")
    code, _, err = aws("trigger", "remove", trigger_id)
    assert code == 2 and f"trigger {trigger_id} belongs to carol" in err and "you are mallory" in err
    assert len(aws.json("trigger", "list")["triggers"]) == 1


def test_list_mine_and_by_owner(aws, monkeypatch):
    aws("trigger", "add", "--bucket", "data", "--prefix", "a/", "--job", "retrain.yaml")
    monkeypatch.setattr("getpass.getuser", lambda: "dave")
    (aws.home / "dave.yaml").write_text(JOB.replace("team: vision\n", "team: vision\nowner: dave\n"))
    aws("trigger", "add", "--bucket", "data", "--prefix", "b/", "--job", "dave.yaml")
    assert [t["prefix"] for t in aws.json("trigger", "list", "--mine")["triggers"]] == ["b/"]
    assert [t["owner"] for t in aws.json("trigger", "list", "--owner", "carol")["triggers"]] == ["carol"]
    assert len(aws.json("trigger", "list")["triggers"]) == 2


@pytest.mark.parametrize("args, problem", [
    (("--bucket", "Data", "--prefix", "in/", "--job", "retrain.yaml"), "'Data' is not an S3 bucket name"),
    (("--bucket", "data", "--prefix", "in/", "--job", "retrain.yaml", "--debounce", "1h"),
     "the debounce window must be 1s to 15m00s"),
    (("--bucket", "data", "--prefix", "in/", "--job", "missing.yaml"), "no such file: missing.yaml"),
    (("--bucket", "data", "--prefix", "in/", "--job", "bad.yaml"), "bad.yaml:3: unknown field 'gpu'"),
])
def test_bad_input_is_refused_with_a_clear_message_and_nothing_is_added(aws, args, problem):
    (aws.home / "bad.yaml").write_text("name: x\ncommand: [true]\ngpu: 2\n")
    code, out, err = aws("trigger", "add", *args)
    assert code == 2 and out == "" and problem in err
    assert aws.json("trigger", "list") == {"triggers": []}


def test_removing_an_unknown_trigger_is_an_error(aws):
    code, _, err = aws("trigger", "remove", "tr-ffff")
    assert code == 2 and "no trigger tr-ffff" in err
