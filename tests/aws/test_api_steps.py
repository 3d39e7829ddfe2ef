"""A large array cancelled, held or released through the api function in
bounded steps (ControlService.step): each answer within API Gateway's 29 s
and Lambda's 6 MB, every task changed exactly once however many calls it
takes, and a step asked again changing nothing twice."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest

from gqa.adapters.aws import admissions
from gqa.adapters.clock import SystemClock
from gqa.http import wire
from gqa.models.job import JobState
from gqa.services.submit import SubmitService
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.aws_limits import LAMBDA_ANSWER_BYTES, gateway_answer
from tests.aws.lean_moto import lean_dynamodb
from tests.aws.moto_support import LambdaContext, capture
from tests.aws.test_api_handler import api  # noqa: F401  (the fixture: the handler on moto)
from tests.builders import spec

pytestmark = pytest.mark.aws


@dataclass
class ShortContext(LambdaContext):
    """A function with little time left: a step's budget is half of it."""

    remaining_ms: int = 2000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def virtual_pace():
    """The writes' pacing (admissions.pace) on a virtual clock: no test waits for it; and moto's
    transactions costing what they touch, not the table (lean_moto.py)."""
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with mock.patch.object(admissions, "sleep", sleep), mock.patch.object(admissions, "monotonic", lambda: now[0]), \
            lean_dynamodb():
        yield


def steps(api, verb: str, group: str, who: str = "alice", *, remaining_ms: int = 2000,
          token: str | None = None) -> list[dict[str, Any]]:
    """Every answer of `verb` on the group from `token` on, each step asked with the last's `next`,
    as API Gateway answers it."""
    answers: list[dict[str, Any]] = []
    while True:
        event = rest_event("POST", f"/jobs/{group}/{verb}", arn=user_arn(who), query={"next": token} if token else None)
        context = ShortContext(function_name="gqa-api", remaining_ms=remaining_ms)
        raw = gateway_answer(lambda event=event, context=context: api.module.handler(event, context))
        assert raw["statusCode"] == 200, raw
        assert len(raw["body"].encode()) < LAMBDA_ANSWER_BYTES
        answers.append(json.loads(raw["body"]))
        token = answers[-1]["next"]
        if token is None:
            return answers
        assert len(answers) < 1000, "the steps do not end"


@pytest.mark.slow
def test_a_10000_task_array_is_cancelled_in_bounded_steps_each_task_once(api, virtual_pace):  # noqa: F811
    [first, *_] = SubmitService(api.store, SystemClock()).submit(spec(array="0-9999"), owner="alice")
    client = api.module.container().store.client
    calls = capture(client)
    answers = steps(api, "cancel", first.group)

    assert len(answers) >= 5                              # a small budget: several steps
    results = [r for a in answers for r in wire.results_from_dict(a)]
    assert Counter(r.action for r in results) == {"cancelled": 10_000}
    assert len({r.job.id for r in results}) == 10_000     # each task told once
    jobs = api.store.resolve(first.group)
    assert {j.state for j in jobs} == {JobState.CANCELLED} and len(jobs) == 10_000
    assert all(sum(t.state == JobState.CANCELLED for t in j.history) == 1 for j in jobs)
    # the answers carry runs of indices, not records: a few hundred bytes a step
    assert max(len(json.dumps(a)) for a in answers) < 10_000
    ops = Counter(c["_operation"] for c in calls)
    assert ops["BatchGetItem"] == 0                       # each slice is written from the page just read
    assert ops["TransactWriteItems"] == 10_000 // 25
    print(f"\n{len(answers)} calls; per 1,000 tasks: "
          + ", ".join(f"{op} {n / 10:.1f}" for op, n in sorted(ops.items()))
          + f"; {sum(len(json.dumps(a)) for a in answers) / 10:,.0f} answer bytes")


def test_a_step_asked_again_changes_nothing_twice_and_hold_then_release_go_through_steps(api,  # noqa: F811
                                                                                        virtual_pace):
    [first, *_] = SubmitService(api.store, SystemClock()).submit(spec(array="0-349"), owner="alice")
    event = rest_event("POST", f"/jobs/{first.group}/hold", arn=user_arn("alice"))
    one = json.loads(api.module.handler(event, ShortContext(function_name="gqa-api", remaining_ms=1))["body"])
    assert one["next"] is not None                        # past its time: one slice, and where to go on
    again = json.loads(api.module.handler(event, ShortContext(function_name="gqa-api", remaining_ms=1))["body"])
    assert [(r.action, r.detail) for r in wire.results_from_dict(again)] == [("unchanged", "already held")] * 100
    rest = steps(api, "hold", first.group, remaining_ms=1, token=one["next"])
    held = [r for a in [one, *rest] for r in wire.results_from_dict(a)]
    assert Counter(r.action for r in held) == {"held": 350}
    assert {j.state for j in api.store.resolve(first.group)} == {JobState.HELD}

    released = [r for a in steps(api, "release", first.group) for r in wire.results_from_dict(a)]
    assert Counter(r.action for r in released) == {"released": 350}
    assert {j.state for j in api.store.resolve(first.group)} == {JobState.QUEUED}


def test_a_caller_who_may_not_is_refused_at_every_step(api, virtual_pace):  # noqa: F811
    [first, *_] = SubmitService(api.store, SystemClock()).submit(spec(array="0-249"), owner="alice")
    event = rest_event("POST", f"/jobs/{first.group}/cancel", arn=user_arn("alice"))
    token = json.loads(api.module.handler(event, ShortContext(function_name="gqa-api", remaining_ms=1))["body"])["next"]
    before = api.tables()
    for query in (None, {"next": token}):                 # a token does not skip the check
        status, answer = api("POST", f"/jobs/{first.group}/cancel", "bob", query=query)
        assert status == 403 and answer["error"] == "NotPermitted"
    assert api.tables() == before
