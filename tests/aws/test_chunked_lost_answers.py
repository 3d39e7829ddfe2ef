"""A chunk's move of the progress whose answer is lost: DynamoDB applied it,
the answer became a 500, and the retry fails its own condition. The delivery
is still the one that moved it and hands the rest on; a copy of the same
message running alongside hands it on too, and the chain stays single
(services/chunked.py)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError

from gqa.adapters.aws.admissions import DynamoDBAdmissions
from gqa.adapters.aws.sqs_intake import parse_submission
from tests.aws.test_chunked_admission import (Poller, admitted_once, progress, small_chunks,  # noqa: F401
                                              world)
from tests.builders import spec

pytestmark = pytest.mark.aws


def test_a_move_whose_answer_was_lost_still_hands_the_rest_on(world, small_chunks):  # noqa: F811
    world, _ = world
    array = world.send(spec(array="0-499"))
    poller = Poller(world)
    assert poller.deliver(poller.next())            # tasks 0-99, and the continuation at 100
    lost: list[bool] = []

    def is_move(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["move"] = "mover" in params.get("ExpressionAttributeNames", {}).values()

    def lose_answer(context: dict[str, Any], **_: Any) -> None:
        if context.get("move") and not lost:        # applied by DynamoDB; its answer never arrived
            lost.append(True)
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "internal"},
                               "ResponseMetadata": {"HTTPStatusCode": 500}}, "UpdateItem")

    events = world.admit.container().store.client.meta.events
    events.register("before-parameter-build.dynamodb.UpdateItem", is_move)
    events.register("after-call.dynamodb.UpdateItem", lose_answer)
    assert poller.deliver(poller.next())            # tasks 100-199
    assert lost
    assert poller.drain() == 3                      # 200, 300, 400: the chain went on
    admitted_once(world, array.group, 500)
    assert progress(world, array.group).remaining == 0


def test_a_copy_of_the_message_moving_the_progress_meanwhile_leaves_one_chain(world, small_chunks):  # noqa: F811
    world, _ = world
    array = world.send(spec(array="0-499"))
    poller = Poller(world)
    assert poller.deliver(poller.next())
    record = poller.next()                          # the chunk at 100, delivered twice at once
    service = world.admit.container().service
    advance = DynamoDBAdmissions.advance
    copies: list[bool] = []

    def copy_first(self: DynamoDBAdmissions, *args: Any, **kwargs: Any) -> bool:
        if not copies:   # the copy writes the same chunk and moves the progress before this one
            copies.append(True)
            service.admit(parse_submission(record["body"]), delivery=record["messageId"])
        return advance(self, *args, **kwargs)

    with mock.patch.object(DynamoDBAdmissions, "advance", copy_first):
        assert poller.deliver(record)
    assert copies
    # both hand the rest on (neither can tell the other's move from its own): the second
    # continuation finds its chunk moved by the first and stops
    assert poller.drain() == 3 + 1
    admitted_once(world, array.group, 500)
    assert progress(world, array.group).remaining == 0
    starts = [m.get("start", 0) for m in poller.handled]
    assert starts.count(200) == 2 and all(starts.count(s) == 1 for s in (0, 100, 300, 400))
