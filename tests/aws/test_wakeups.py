"""The wake-up messages: what a writer names and carries, and what the
dispatch function makes of a batch of them."""

from __future__ import annotations

import json

import pytest

from gqa.adapters.aws import wakeups


def records(*bodies: str) -> list[dict]:
    return [{"messageId": f"m-{n}", "body": body} for n, body in enumerate(bodies)]


def item(job_id: str, rev: int, state: str = "SUCCEEDED") -> dict:
    return {"grp": job_id, "id": job_id, "rev": rev, "state": state}


def test_a_wakeup_names_its_jobs_and_carries_the_items_written():
    body = wakeups.body(["7", "8"], {"7": item("7", 3)})
    assert wakeups.named(records(body)) == {"7": item("7", 3), "8": None}   # 8: read it


@pytest.mark.parametrize("bodies", [
    ['{"wake": true}'],                                           # admission's: names nothing
    [wakeups.body(["1"]), '{"wake": true}'],                      # one of the batch names nothing
    ["not json"],
    ['{"wake": true, "jobs": [1, 2]}'],
], ids=["bare", "one-bare", "garbled", "not-ids"])
def test_a_batch_with_a_wakeup_that_names_nothing_leaves_what_changed_unknown(bodies):
    assert wakeups.named(records(*bodies)) is None


def test_the_same_job_in_two_wakeups_keeps_its_later_write_or_is_read():
    later = wakeups.named(records(wakeups.body(["5"], {"5": item("5", 4)}),
                                  wakeups.body(["5"], {"5": item("5", 2)})))
    assert later == {"5": item("5", 4)}
    assert wakeups.named(records(wakeups.body(["5"], {"5": item("5", 4)}), wakeups.body(["5"]))) == {"5": None}


def test_a_wakeup_stays_within_a_message():
    many = [str(n) for n in range(wakeups.MOST_NAMED + 1)]
    assert json.loads(wakeups.body(many)) == {"wake": True}        # too many to name: the index is read
    written = {n: {**item(n, 1), "pad": "x" * 1000} for n in many[:500]}
    body = wakeups.body(many[:500], written)
    assert len(body) < 256 * 1024
    named = wakeups.named(records(body))
    carried = [n for n, i in named.items() if i is not None]
    assert 0 < len(carried) < 500 and len(named) == 500           # the rest named, to be read


class Intake:
    """The intake's wake-up queue as WakeDispatcher uses it; `fail` refuses every send."""

    wakeup_url = "https://sqs.us-east-1.amazonaws.com/123456789012/gqa-wakeup"

    def __init__(self, fail: bool = False):
        self.fail, self.sent = fail, []

    def call(self, operation: str, **kwargs):
        if self.fail:
            raise ConnectionError("the queue is unreachable")
        self.sent.append((operation, kwargs))


class Store:
    def wakeup_items(self, job_ids):
        return {j: item(j, 1) for j in job_ids if j != "unseen"}


def test_the_waker_names_the_jobs_with_what_its_store_just_wrote():
    intake = Intake()
    wakeups.WakeDispatcher(intake, Store()).wake(["3", "unseen"])
    [(operation, kwargs)] = intake.sent
    assert operation == "SendMessage" and kwargs["QueueUrl"] == Intake.wakeup_url
    assert wakeups.named(records(kwargs["MessageBody"])) == {"3": item("3", 1), "unseen": None}


def test_a_waker_without_a_store_names_the_jobs_only():
    intake = Intake()
    wakeups.WakeDispatcher(intake).wake(["3"])
    assert wakeups.named(records(intake.sent[0][1]["MessageBody"])) == {"3": None}


def test_a_failed_wakeup_is_raised_unless_the_caller_takes_it():
    with pytest.raises(ConnectionError):
        wakeups.WakeDispatcher(Intake(fail=True), Store()).wake(["3"])
    taken = []
    wakeups.WakeDispatcher(Intake(fail=True), Store(), on_error=lambda: taken.append("logged")).wake(["3"])
    assert taken == ["logged"]
