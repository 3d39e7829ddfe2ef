"""The local sender against receivers that misbehave, and notices whose
text or address does: a slow webhook gets a notice once, one recipient
never holds up another (each has a lane of its own), an address nothing can be sent to gives up at once
instead of stopping the round, Slack's control sequences in a user's text
are shown as written, a mail server's 5xx is final, and the daemon's log
never shows a webhook's secret path."""

from __future__ import annotations

import logging
import time

import pytest

from gqa.adapters.local import notice_delivery
from gqa.adapters.local.notice_channels import NoticeSettings
from gqa.adapters.local.notice_outbox import MAX_TRIES, NoticeOutbox, backoff
from gqa.adapters.local.notice_sender import NoticeSender
from gqa.models.errors import BackendUnavailable
from gqa.models.notices import Notice
from tests.notice_receivers import HookReceiver, MailReceiver, free_port


def sender_for(queue, send=None, **settings) -> NoticeSender:
    extra = {"send": send} if send else {}
    sender = NoticeSender(queue.store.path, NoticeSettings(**settings), clock=queue.clock.now, **extra)
    sender.outbox = NoticeOutbox(queue.store.path)   # the sender's own connection, without its thread
    return sender


def alert(sender: NoticeSender, key: str, to: str, at: float = 0.0) -> None:
    """A notice given whole (as an alert is), to `to`."""
    assert sender.outbox is not None
    assert sender.outbox.put(key, "idle", f"gqa: {key}", "GPUs idle", at, recipient=to)


def errors(sender: NoticeSender) -> dict[str, str | None]:
    assert sender.outbox is not None
    return dict(sender.outbox.db.execute("SELECT key, error FROM notices").fetchall())


@pytest.fixture
def hook():
    receiver = HookReceiver().start()
    yield receiver
    receiver.stop()


# 1. a slow webhook -------------------------------------------------------------------------------

def test_each_post_carries_the_notices_key_as_its_idempotency_key(queue, hook):
    sender = sender_for(queue, webhook=hook.url())
    job = queue.start(notify={"events": ["begin"]})
    assert sender.deliver_due() == 1
    assert [body["key"] for body in hook.wait_for(1)] == [f"{job.id}.1.running"]


@pytest.mark.slow
def test_a_webhook_that_answers_after_five_seconds_gets_the_notice_once(queue):
    slow = HookReceiver(mode="slow", delay=5.5).start()      # past the old 5 s, within the 30 s answer
    try:
        sender = sender_for(queue, webhook=slow.url())
        job = queue.start(notify={"events": ["begin"]})
        assert sender.deliver_due() == 1
        queue.clock.advance(3600)
        assert sender.deliver_due() == 0
        assert len(slow.bodies) == 1
        assert sender.outbox.outcomes() == {f"{job.id}.1.running": "sent"}
    finally:
        slow.stop()


def test_a_late_answer_is_worded_as_a_timeout_not_as_unreachable(queue, monkeypatch, caplog):
    monkeypatch.setattr(notice_delivery, "ANSWER_TIMEOUT", 0.3)
    hang = HookReceiver(mode="hang").start()
    try:
        sender = sender_for(queue, webhook=hang.url())
        job = queue.start(notify={"events": ["begin"]})
        with caplog.at_level(logging.WARNING, "gqa.notices"):
            started = time.monotonic()
            assert sender.deliver_due() == 0
            assert time.monotonic() - started < 3
        error = errors(sender)[f"{job.id}.1.running"]
        assert error is not None and "timed out: no answer within 0.3 s" in error and "unreachable" not in error
        assert any("timed out" in r.getMessage() for r in caplog.records)
        assert not any("unreachable" in r.getMessage() for r in caplog.records)
    finally:
        hang.stop()


def test_a_receiver_down_is_still_unreachable(queue):
    sender = sender_for(queue, webhook=f"http://127.0.0.1:{free_port()}/hook")
    job = queue.start(notify={"events": ["begin"]})
    assert sender.deliver_due() == 0
    assert "unreachable" in (errors(sender)[f"{job.id}.1.running"] or "")


# 2. one recipient never holds up the others -----------------------------------------------------------

def test_a_hook_that_hangs_holds_up_another_recipient_one_try_at_most(queue, monkeypatch, hook):
    monkeypatch.setattr(notice_delivery, "ANSWER_TIMEOUT", 0.5)
    hang = HookReceiver(mode="hang").start()
    try:
        sender = sender_for(queue)
        for task in range(10):                              # an array's ten tasks, to a hook that hangs
            alert(sender, f"task{task}", hang.url())
        alert(sender, "other", hook.url("/other"))          # another job's, written after them
        started = time.monotonic()
        assert sender.deliver_due() == 1
        took = time.monotonic() - started
        assert [body["path"] for body in hook.wait_for(1)] == ["/other"]
        assert took < 0.5 * 3, f"{took:.1f} s: more than one try to the hook that hangs"
        tried = dict(sender.outbox.db.execute("SELECT key, tries FROM notices WHERE key LIKE 'task%'"))
        assert sorted(tried.values()) == [0] * 9 + [1]      # the others wait for its next try, uncounted
        assert sender.deliver_due() == 0                    # and are not due before it
        queue.clock.advance(backoff(1))
        alert(sender, "later", hook.url("/later"), queue.clock.now())
        assert sender.deliver_due() == 1                    # the fresh one first; one more try to the hang
        assert [body["path"] for body in hook.wait_for(2)] == ["/other", "/later"]
    finally:
        hang.stop()


def test_a_hook_that_hangs_holds_up_no_other_recipient_in_the_daemons_sender(queue, monkeypatch, hook):
    # the sender as the daemon runs it, in its thread: the other receiver's notices go out while
    # the hook that hangs still holds its first one (they waited the whole timeout behind it)
    monkeypatch.setattr(notice_delivery, "ANSWER_TIMEOUT", 5.0)
    hang = HookReceiver(mode="hang").start()
    sender = sender_for(queue)
    try:
        for task in range(10):
            alert(sender, f"task{task}", hang.url())
        for n in range(5):
            alert(sender, f"other{n}", hook.url(f"/other{n}"))
        started = time.monotonic()
        sender.start()
        # each path is its own receiver, so its own lane: they go out side by side, in no set order
        assert sorted(body["path"] for body in hook.wait_for(5, timeout=10)) == [f"/other{n}" for n in range(5)]
        took = time.monotonic() - started
        assert took < 2.5, f"{took:.1f} s behind the hook that hangs"
    finally:
        sender.stop()
        hang.stop()
    tried = dict(sender.outbox.db.execute("SELECT key, tries FROM notices WHERE key LIKE 'task%'"))
    assert sorted(tried.values()) == [0] * 9 + [1]          # one send at a time to the hook that hangs


def test_the_daemons_sender_idles_between_looks_at_the_outbox(queue, monkeypatch):
    # with nothing to send it looks every POLL seconds: it once looked as fast as it could, a core's half
    sender = sender_for(queue)
    looks = []
    due = NoticeOutbox.due
    monkeypatch.setattr(NoticeOutbox, "due", lambda self, now, *a, **k: (looks.append(now), due(self, now, *a, **k))[1])
    sender.start()
    try:
        time.sleep(1.2)
    finally:
        sender.stop()
    assert 1 <= len(looks) <= 4, f"{len(looks)} looks at the outbox in 1.2 s"


def test_a_retried_notice_goes_behind_fresh_ones(queue):
    outbox = NoticeOutbox(queue.store.path)
    outbox.put("old", "idle", "s", "m", 0.0, recipient="ana@example.org")
    [old] = outbox.due(queue.clock.now())
    outbox.trying(old, queue.clock.now())
    queue.clock.advance(backoff(1))
    outbox.put("new", "idle", "s", "m", queue.clock.now(), recipient="ana@example.org")
    assert [pending.key for pending in outbox.due(queue.clock.now())] == ["new", "old"]


# 3. an error sending one notice is that notice's ------------------------------------------------------

@pytest.mark.parametrize("bad", ["http://127.0.0.1:abc/hook", "http://127.0.0.1:{port}/hoök",
                                 "http://127.0.0.1:{port}/a hook", "http://[::1/hook"])
def test_a_url_nothing_can_be_sent_to_gives_up_at_once_and_the_others_go_out(queue, hook, bad, caplog):
    sender = sender_for(queue)
    alert(sender, "bad", bad.format(port=hook.port))
    alert(sender, "good", hook.url("/good"))
    with caplog.at_level(logging.WARNING, "gqa.notices"):
        assert sender.deliver_due() == 1
    assert sender.outbox.outcomes() == {"bad": "gave up", "good": "sent"}
    assert "not a URL that can be sent to" in (errors(sender)["bad"] or "") or \
        "percent-encode" in (errors(sender)["bad"] or "")
    assert [body["path"] for body in hook.wait_for(1)] == ["/good"]
    assert any("gave up on bad" in r.getMessage() for r in caplog.records)


def test_any_error_sending_is_a_failed_try_and_gives_up_after_max_tries(queue, hook):
    def send(notice, to, settings):
        if notice.key == "broken":
            raise RuntimeError("something unforeseen")
        notice_delivery.deliver(notice, to, settings)

    sender = sender_for(queue, send=send)
    alert(sender, "broken", hook.url("/broken"))
    alert(sender, "fine", hook.url("/fine"))
    assert sender.deliver_due() == 1                         # the round goes on past it
    assert errors(sender)["broken"] == "RuntimeError: something unforeseen"
    for _ in range(MAX_TRIES):
        queue.clock.advance(backoff(MAX_TRIES))
        sender.deliver_due()
    assert sender.outbox.outcomes() == {"broken": "gave up", "fine": "sent"}
    assert sender.outbox.db.execute("SELECT tries FROM notices WHERE key = 'broken'").fetchone() == (MAX_TRIES,)


# 4. Slack's control sequences in a user's text ---------------------------------------------------------

def test_slack_control_sequences_in_a_notice_are_shown_as_written():
    notice = Notice("1.1.failed", "fail", None, "<@U123>", "a&b", "gqa: job 1 (<!channel>) failed",
                    "Reason: <mailto:x|approve here> & more")
    text = notice.slack["text"]
    assert "<" not in text and ">" not in text
    assert text == ("gqa: job 1 (&lt;!channel&gt;) failed\n"
                    "Reason: &lt;mailto:x|approve here&gt; &amp; more")


def test_a_jobs_name_reaches_slack_escaped(queue, hook):
    sender = sender_for(queue, webhook=hook.url())
    job = queue.start(name="<!channel> <@U123> & co", notify={"events": ["begin"]})
    assert sender.deliver_due() == 1
    [body] = hook.wait_for(1)
    assert body["json"]["text"].startswith(f"gqa: job {job.id} (&lt;!channel&gt; &lt;@U123&gt; &amp; co) began\n")


# 5. a mail server's refusal --------------------------------------------------------------------------

def test_a_mail_servers_5xx_for_the_recipient_gives_up_at_once_with_its_words(queue):
    mail = MailReceiver(refuse={"gone@example.org": "550 5.1.1 no such user here",
                                "full@example.org": "452 4.2.2 mailbox full"}).start()
    try:
        sender = sender_for(queue, smtp=mail.address, mail_from="gqa@example.org")
        alert(sender, "gone", "gone@example.org")
        alert(sender, "full", "full@example.org")
        alert(sender, "ana", "ana@example.org")
        assert sender.deliver_due() == 1
        assert sender.outbox.outcomes() == {"gone": "gave up", "full": None, "ana": "sent"}
        said = errors(sender)
        assert "550" in (said["gone"] or "") and "no such user here" in (said["gone"] or "")
        assert "452" in (said["full"] or "")              # a 4xx: tried again
    finally:
        mail.stop()


# 6. a webhook's secret path ----------------------------------------------------------------------------

def test_the_log_names_a_webhook_by_scheme_and_host_only(queue, caplog):
    port = free_port()
    sender = sender_for(queue, webhook=f"http://127.0.0.1:{port}/services/T0/B0/SECRETTOKEN")
    job = queue.start(notify={"events": ["begin"]})
    with caplog.at_level(logging.INFO, "gqa.notices"):
        for _ in range(MAX_TRIES):
            sender.deliver_due()
            queue.clock.advance(backoff(MAX_TRIES))
    said = [r.getMessage() for r in caplog.records]
    assert any(f"http://127.0.0.1:{port}/…" in line for line in said)
    assert any("gave up" in line for line in said)
    assert not any("SECRETTOKEN" in line or "/services" in line for line in said)
    assert "SECRETTOKEN" not in (errors(sender)[f"{job.id}.1.running"] or "")


def test_a_send_error_quoting_the_url_is_told_without_its_path(queue, caplog):
    url = "https://hooks.example.org/services/T0/B0/SECRETTOKEN"

    def send(notice, to, settings):
        raise BackendUnavailable(f"could not post to {to}")

    sender = sender_for(queue, send=send, webhook=url)
    queue.start(notify={"events": ["begin"]})
    with caplog.at_level(logging.WARNING, "gqa.notices"):
        sender.deliver_due()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "https://hooks.example.org/…" in said and "SECRETTOKEN" not in said
