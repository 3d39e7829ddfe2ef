"""A hold or a release on an array still being admitted in chunks reaches
the tasks not written yet, and a chunk being written meanwhile, as a cancel
does (services/chunked.py); an update waits until every task is written."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

from gqa.adapters.aws.admissions import DynamoDBAdmissions
from gqa.models.job import JobState
from tests.aws.api_gateway import rest_event, user_arn
from tests.aws.fake_batch import API_CONTEXT
from tests.aws.test_chunked_admission import (Poller, admitted_once, in_steps, get,  # noqa: F401
                                              small_chunks, world)
from tests.builders import spec

pytestmark = [pytest.mark.aws, pytest.mark.slow]
S = JobState


def call(world, verb: str, group: str, body: str | None = None) -> dict[str, Any]:
    if verb in ("hold", "release"):   # in bounded steps, as the CLI asks them
        return {"statusCode": in_steps(world, group, verb)}
    return world.api.handler(rest_event("POST", f"/jobs/{group}/{verb}", arn=user_arn("alice"), body=body),
                             API_CONTEXT)


def test_holding_an_array_being_admitted_holds_the_rest_and_a_release_frees_them(world, small_chunks):  # noqa: F811
    world, _ = world
    array = world.send(spec(array="0-299"))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    assert get(world, f"/jobs/{array.group}")["admitting"] == 200

    assert call(world, "hold", array.group)["statusCode"] == 200
    assert poller.deliver(poller.next())           # the second chunk, written held
    assert call(world, "update", array.group, '{"gpus": 2}')["statusCode"] == 409    # not all written yet
    poller.drain()
    jobs = admitted_once(world, array.group, 300)
    assert {(j.state, j.user_hold) for j in jobs} == {(S.HELD, True)}
    assert {j.reason for j in jobs} == {"held by alice"}

    assert call(world, "release", array.group)["statusCode"] == 200
    jobs = admitted_once(world, array.group, 300)
    assert {(j.state, j.user_hold, j.reason) for j in jobs} == {(S.QUEUED, False, "released by alice")}


def test_a_hold_while_a_chunk_is_written_reaches_that_chunk_too(world, small_chunks):  # noqa: F811
    world, _ = world
    array = world.send(spec(array="0-299"))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    advance = DynamoDBAdmissions.advance
    held = []

    def hold_first(self, *args: Any, **kwargs: Any) -> bool:
        if not held:   # the user's hold lands between the chunk's writes and its progress
            held.append(call(world, "hold", array.group)["statusCode"])
        return advance(self, *args, **kwargs)

    with mock.patch.object(DynamoDBAdmissions, "advance", hold_first):
        assert poller.deliver(poller.next())
    assert held == [200]
    poller.drain()
    assert {(j.state, j.user_hold) for j in admitted_once(world, array.group, 300)} == {(S.HELD, True)}
