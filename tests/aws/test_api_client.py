"""ApiClient: SigV4 for execute-api from the standard credential chain,
errors by class name, and bounded retries only where a retry cannot do the
work twice. The transport is a fake: no network, no moto."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import boto3
import pytest

from gqa.adapters.aws.api_client import ApiClient, job_path, region_of
from gqa.models.errors import (BackendUnavailable, Conflict, InvalidTransition, NotAuthenticated, NotFound,
                               NotPermitted, NotStarted, Rejected, SpecError)
from tests.aws.api_gateway import ENDPOINT, REGION, Caller, _signature

KEY, SECRET = "AKIAALICEXXXXXXXXXXX", "alice-secret"


@dataclass
class Answers:
    """A transport that answers from a script: (status, body) or an OSError per call."""

    script: list
    calls: list[dict] = field(default_factory=list)

    def __call__(self, method, url, headers, body):
        self.calls.append({"method": method, "url": url, "headers": dict(headers), "body": body})
        answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(answer, Exception):
            raise answer
        status, data = answer
        return status, data if isinstance(data, bytes) else json.dumps(data).encode()


def client(*script, token: str | None = None, sleeps: list | None = None) -> tuple[ApiClient, Answers]:
    answers = Answers(list(script))
    session = boto3.session.Session(aws_access_key_id=KEY, aws_secret_access_key=SECRET, aws_session_token=token,
                                    region_name="eu-west-1")
    slept = sleeps if sleeps is not None else []
    return ApiClient(ENDPOINT, session=session, transport=answers, sleep=slept.append, rng=lambda: 1.0), answers


def test_requests_are_signed_with_sigv4_for_execute_api_in_the_endpoints_region():
    api, answers = client((200, {"owner": "alice"}))
    assert api.call("POST", "/jobs/1/deny", body={"reason": "no"}) == {"owner": "alice"}
    [sent] = answers.calls
    auth = sent["headers"]["Authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={KEY}/")
    assert f"/{REGION}/execute-api/aws4_request" in auth           # the endpoint's region, not the profile's
    signature = auth.rsplit("Signature=", 1)[1]
    assert signature == _signature("POST", sent["url"], sent["headers"], sent["body"], Caller("alice", "", KEY, SECRET),
                                   REGION)
    assert json.loads(sent["body"]) == {"reason": "no"} and sent["url"] == f"{ENDPOINT}/jobs/1/deny"


def test_temporary_credentials_send_their_session_token():
    api, answers = client((200, {}), token="session-token")
    api.call("GET", "/whoami")
    assert answers.calls[0]["headers"]["X-Amz-Security-Token"] == "session-token"


def test_query_values_are_encoded_and_none_left_out():
    api, answers = client((200, {}))
    api.call("GET", "/cost", query={"team": "vision & co", "period": None, "explain": False})
    assert answers.calls[0]["url"] == f"{ENDPOINT}/cost?explain=false&team=vision+%26+co"


@pytest.mark.parametrize("status, name, error", [
    (400, "SpecError", SpecError), (401, "NotAuthenticated", NotAuthenticated), (403, "NotPermitted", NotPermitted),
    (404, "NotFound", NotFound), (409, "Conflict", Conflict), (409, "InvalidTransition", InvalidTransition),
    (422, "Rejected", Rejected), (503, "BackendUnavailable", BackendUnavailable),
    (404, "NotStarted", NotStarted),     # a NotFound the CLI tells apart: `gqa logs -f` waits on it
])
def test_an_error_answer_raises_the_domain_error_of_that_name_with_its_message(status, name, error):
    api, _ = client((status, {"error": name, "message": "job 12 belongs to alice"}))
    with pytest.raises(error) as raised:
        api.call("POST", "/jobs/12/cancel")
    assert type(raised.value) is error and str(raised.value) == "job 12 belongs to alice"


def test_an_error_name_that_is_not_a_domain_error_is_not_trusted():
    api, _ = client((500, {"error": "SystemExit", "message": "x"}))
    with pytest.raises(BackendUnavailable, match="answered 500"):
        api.call("POST", "/jobs")


def test_api_gateways_own_refusal_says_what_to_check():
    api, _ = client((403, {"message": "The security token included in the request is invalid."}))
    with pytest.raises(NotPermitted, match="security token.*execute-api:Invoke"):
        api.call("GET", "/queue")


def test_throttling_is_retried_with_growing_jittered_waits_for_every_method():
    sleeps: list[float] = []
    api, answers = client((429, {"message": "Too Many Requests"}), (429, {}), (202, {"jobs": ["1"]}), sleeps=sleeps)
    assert api.call("POST", "/jobs", body={"spec": {}}) == {"jobs": ["1"]}
    assert len(answers.calls) == 3 and sleeps == [0.25, 0.5]
    # each try signed afresh (the signature holds the time)
    assert all("Authorization" in c["headers"] for c in answers.calls)


def test_throttling_gives_up_after_the_attempts():
    api, answers = client((429, {"message": "Too Many Requests"}))
    with pytest.raises(BackendUnavailable, match="throttling requests \\(429\\) after 4 tries"):
        api.call("GET", "/queue")
    assert len(answers.calls) == 4


@pytest.mark.parametrize("method, tries", [("GET", 2), ("PUT", 2), ("POST", 1)])
def test_server_errors_are_retried_only_where_a_repeat_cannot_do_the_work_twice(method, tries):
    api, answers = client((502, {"message": "Internal server error"}), (200, {}))
    if tries == 1:
        with pytest.raises(BackendUnavailable, match="answered 502"):
            api.call(method, "/jobs/1/cancel")
    else:
        assert api.call(method, "/queue") == {}
    assert len(answers.calls) == tries


@pytest.mark.parametrize("method, tries", [("GET", 2), ("POST", 1)])
def test_network_failures_likewise(method, tries):
    api, answers = client(ConnectionResetError("reset by peer"), (200, {}))
    if tries == 1:
        with pytest.raises(BackendUnavailable, match="cannot reach the gqa API.*reset by peer"):
            api.call(method, "/jobs")
    else:
        assert api.call(method, "/queue") == {}
    assert len(answers.calls) == tries


@pytest.mark.parametrize("body", [b"<html>", b"[1, 2]"])
def test_an_answer_that_is_not_a_json_object_is_backend_unavailable(body):
    api, _ = client((200, body))
    with pytest.raises(BackendUnavailable, match="answered 200"):
        api.call("GET", "/queue")


class NoCredentials:
    region_name = "us-east-1"

    def get_credentials(self):
        return None


def test_no_credentials_say_how_to_get_some():
    api = ApiClient(ENDPOINT, session=NoCredentials(), transport=Answers([(200, {})]))
    with pytest.raises(NotAuthenticated, match="no AWS credentials found.*aws sso login"):
        api.call("GET", "/whoami")


def test_an_unknown_aws_profile_is_a_spec_error(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    api = ApiClient(ENDPOINT, profile="nosuch", transport=Answers([(200, {})]))
    with pytest.raises(SpecError, match="no AWS profile named 'nosuch'"):
        api.call("GET", "/whoami")


@pytest.mark.parametrize("endpoint, region", [
    ("https://abc.execute-api.ap-south-1.amazonaws.com/prod", "ap-south-1"),
    ("https://abc.execute-api.cn-north-1.amazonaws.com.cn/v1", "cn-north-1"),
    ("https://gqa.example.com", None),
])
def test_the_region_comes_from_an_execute_api_endpoint(endpoint, region):
    assert region_of(endpoint) == region


def test_a_custom_domain_signs_in_the_sessions_region():
    answers = Answers([(200, {})])
    session = boto3.session.Session(aws_access_key_id=KEY, aws_secret_access_key=SECRET, region_name="eu-west-1")
    ApiClient("https://gqa.example.com/", session=session, transport=answers).call("GET", "/queue")
    assert "/eu-west-1/execute-api/" in answers.calls[0]["headers"]["Authorization"]
    assert answers.calls[0]["url"] == "https://gqa.example.com/queue"


def test_an_endpoint_that_is_not_a_url_is_a_spec_error():
    with pytest.raises(SpecError, match="not a URL"):
        ApiClient("abc.execute-api.us-east-1.amazonaws.com")


def test_job_paths_join_several_refs_and_quote_each():
    assert job_path(["1", "2_3"], "cancel") == "/jobs/1,2_3/cancel"
    assert job_path("a/b") == "/jobs/a%2Fb"
