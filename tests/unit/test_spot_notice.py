"""gqa/runtime/spot_notice.py against a stand-in for the instance metadata
service: the session token, 404s until the notice, then the notice; a
service that is down, one that refuses tokens, an on-demand instance; which
endpoint a job reads, and how long a reclaimed job waits for its instance."""

from __future__ import annotations

import threading
import time

import pytest

from gqa.runtime import spot_notice
from gqa.runtime.spot_notice import Metadata, Notice, SpotWatch
from tests.imds_stub import MetadataStub, notice_text
from tests.notice_receivers import free_port

ACTION = "/latest/meta-data/spot/instance-action"


@pytest.fixture
def stub():
    served = MetadataStub()
    yield served
    served.close()


class Waits:
    """The watch's wait: records each, never sleeps; `then(n, f)` runs f at the nth wait."""

    def __init__(self, stop_after: int = 50):
        self.calls: list[float] = []
        self.stop_after = stop_after
        self.actions: dict[int, object] = {}

    def then(self, n: int, action) -> Waits:
        self.actions[n] = action
        return self

    def __call__(self, seconds: float) -> bool:
        self.calls.append(seconds)
        action = self.actions.get(len(self.calls))
        if callable(action):
            action()
        return len(self.calls) >= self.stop_after


def watch(endpoint: str, waits: Waits, lines: list[str], **kw) -> SpotWatch:
    return SpotWatch(Metadata(endpoint, **kw), wait=waits, log=lines.append)


def test_the_notice_is_read_with_a_session_token_after_404s(stub):
    at = time.time() + 120
    waits = Waits().then(3, lambda: stub.post(notice_text(at)))
    lines, seen = [], []
    got = watch(stub.endpoint, waits, lines).run(seen.append)
    assert got == Notice("terminate", float(int(at)), notice_text(at)) and seen == [got]
    assert waits.calls == [5.0, 5.0, 5.0] and stub.reads() == 4 and lines == []
    # one token, asked for with its lifetime, sent with every read
    assert [r for r in stub.requests if r[0] == "PUT"] == [("PUT", "/latest/api/token", None)]
    assert {token for method, _, token in stub.requests if method == "GET"} == {"token-1"}
    assert got.describe().startswith("the spot instance is to terminate at ")


def test_a_service_that_is_down_is_tried_three_times_then_left_alone():
    waits, lines = Waits(), []
    got = watch(f"http://127.0.0.1:{free_port()}", waits, lines).run(pytest.fail)
    assert got is None and waits.calls == [5.0, 5.0]
    assert len(lines) == 1 and "cannot be read" in lines[0] and "will not reach this job" in lines[0]


def test_a_refused_token_leaves_the_watch_at_once():
    stub = MetadataStub(token_status=403)
    try:
        waits, lines = Waits(), []
        assert watch(stub.endpoint, waits, lines).run(pytest.fail) is None
        assert waits.calls == [] and stub.reads() == 0
        assert len(lines) == 1 and "a session token was refused: HTTP 403" in lines[0]
    finally:
        stub.close()


def test_an_on_demand_instance_is_not_watched():
    stub = MetadataStub(lifecycle="on-demand")
    try:
        waits, lines = Waits(), []
        assert watch(stub.endpoint, waits, lines).run(pytest.fail) is None
        assert (waits.calls, stub.reads(), lines) == ([], 0, [])
    finally:
        stub.close()


def test_a_failed_read_once_the_service_answered_is_passed_over(stub):
    answers = iter([None, "drop", None])

    def flaky():
        if next(answers, None) == "drop":
            raise RuntimeError("the connection is dropped without an answer")
        return None

    stub.post(flaky)
    waits, lines = Waits(stop_after=3), []
    assert watch(stub.endpoint, waits, lines).run(pytest.fail) is None
    assert (len(waits.calls), stub.reads(), lines) == (3, 3, [])


def test_a_lapsed_token_is_renewed_once_and_by_the_clock(stub):
    now = [1000.0]
    metadata = Metadata(stub.endpoint, clock=lambda: now[0])
    assert metadata.read(ACTION) is None and stub.tokens == ["token-1"]
    stub.expire_tokens()                    # 401, then a new token and the read again
    assert metadata.read(ACTION) is None and stub.tokens[-1] == "token-2"
    now[0] += spot_notice.TOKEN_TTL - spot_notice.RENEW_BEFORE
    assert metadata.read(ACTION) is None and stub.tokens[-1] == "token-3"
    assert [r[0] for r in stub.requests].count("PUT") == 3


def test_stop_ends_the_watch(stub):
    watcher = SpotWatch(Metadata(stub.endpoint), interval=0.05, log=pytest.fail)
    ended = threading.Event()
    threading.Thread(target=lambda: (watcher.run(pytest.fail), ended.set()), daemon=True).start()
    while stub.reads() < 2:
        time.sleep(0.01)
    watcher.stop()
    assert ended.wait(5)


@pytest.mark.parametrize("env, endpoint", [
    ({"AWS_BATCH_JOB_ID": "j-1"}, "http://169.254.169.254"),
    ({"AWS_BATCH_JOB_ID": "j-1", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv6"}, "http://[fd00:ec2::254]"),
    ({"AWS_BATCH_JOB_ID": "j-1", "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:8111/"},
     "http://127.0.0.1:8111"),
    ({"AWS_BATCH_JOB_ID": "j-1", "AWS_EC2_METADATA_DISABLED": "True"}, None),
    ({}, None),                          # not a Batch job: nothing to watch
])
def test_the_endpoint_is_the_sdks_unless_disabled_or_not_on_batch(env, endpoint):
    assert spot_notice.endpoint_of(env) == endpoint
    assert (spot_notice.spot_watch(env) is None) == (endpoint is None)


def test_an_endpoint_that_is_no_address_watches_nothing(capsys):
    env = {"AWS_BATCH_JOB_ID": "j-1", "AWS_EC2_METADATA_SERVICE_ENDPOINT": "169.254.169.254"}
    assert spot_notice.spot_watch(env) is None
    assert "is not an http:// address" in capsys.readouterr().err


@pytest.mark.parametrize("text, action, at", [
    ('{"action": "terminate", "time": "2026-03-02T10:16:07Z"}', "terminate", 1772446567.0),
    ('{"action": "stop", "time": "soon"}', "stop", None),
    ("<html>", "", None),
])
def test_any_body_at_instance_action_is_a_notice(text, action, at):
    assert spot_notice.parse_notice(text) == Notice(action, at, text)


def test_a_reclaimed_job_waits_for_its_instance_at_most_past_the_notices_time():
    now, slept, lines = [1000.0], [], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    spot_notice.hold_for_reclaim(Notice("terminate", 1100.0, ""), 143, clock=lambda: now[0], sleep=sleep,
                                 past=60, log=lines.append)
    assert now[0] == 1160.0 and max(slept) <= 30
    assert "ended with exit code 143 after the spot interruption notice" in lines[0]
    assert "still here 60 s past the notice's time; the job ends with exit code 143" in lines[1]
    # a notice whose time cannot be read counts the notice's two minutes from now
    now[0] = 0.0
    spot_notice.hold_for_reclaim(Notice("", None, ""), 137, clock=lambda: now[0], sleep=sleep, past=60,
                                 log=lines.append)
    assert now[0] == 180.0


@pytest.mark.parametrize("value, grace", [("45", 45.0), (" 110 ", 110.0), ("", 90.0), ("soon", 90.0), ("-3", 0.0),
                                          ("inf", 120.0), ("nan", 0.0)])
def test_the_grace_is_the_job_definitions_else_the_deployments_default(value, grace):
    from gqa.runtime.job_process import grace_of

    assert grace_of({"GQA_CHECKPOINT_GRACE": value}) == grace


def test_the_ipv6_endpoint_is_reached_on_port_80(monkeypatch):
    tried = []

    def connect(address, *args, **kw):
        tried.append(address)
        raise ConnectionRefusedError

    monkeypatch.setattr("socket.create_connection", connect)
    with pytest.raises(spot_notice.Unreachable):
        Metadata(spot_notice.ENDPOINTS["ipv6"]).read(ACTION)
    assert tried == [("fd00:ec2::254", 80)]
