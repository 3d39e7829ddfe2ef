"""The local outbox and sender against real receivers (an SMTP server and an
HTTP server started here): a job's moves are queued by the same write that
makes them, delivered once, retried while a receiver is down, resent at most
once after a crash mid-send, and given up on after MAX_TRIES."""

from __future__ import annotations

import logging

import pytest

from gqa.adapters.local.notice_channels import NoticeSettings
from gqa.adapters.local.notice_outbox import MAX_TRIES, NoticeOutbox, OutboxNotifier, backoff
from gqa.adapters.local.notice_sender import NoticeSender
from gqa.models.job import JobState
from tests.notice_receivers import HookReceiver, MailReceiver, free_port


@pytest.fixture
def mail():
    receiver = MailReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def hook():
    receiver = HookReceiver().start()
    yield receiver
    receiver.stop()


def sender_for(queue, **settings) -> NoticeSender:
    sender = NoticeSender(queue.store.path, NoticeSettings(**settings), clock=queue.clock.now)
    sender.outbox = NoticeOutbox(queue.store.path)   # the sender's own connection, without its thread
    return sender


def test_each_move_a_job_asks_for_is_queued_once_by_the_write_that_makes_it(queue):
    outbox = NoticeOutbox(queue.store.path)
    job = queue.start(notify={"events": ["all"], "to": "ana@example.org"})
    quiet = queue.start()                       # asks for no notices: nothing queued
    queue.exit(job.id, 0)
    queue.exit(quiet.id, 0)
    assert outbox.outcomes() == {f"{job.id}.1.running": None, f"{job.id}.1.succeeded": None}
    # the same move again (a redelivered write) adds nothing
    outbox.db.execute("INSERT INTO history VALUES (?, 99, 'SUCCEEDED', 0, '')", (job.id,))
    assert len(outbox.outcomes()) == 2


def test_mail_names_the_job_and_its_outcome(queue, mail):
    sender = sender_for(queue, smtp=mail.address, mail_from="gqa@example.org")
    job = queue.start(name="train", notify={"events": ["begin", "end"], "to": "ana@example.org"})
    queue.exit(job.id, 3)
    assert sender.deliver_due() == 2
    began, ended = mail.wait_for(2)
    assert began["To"] == "ana@example.org" and began["From"] == "gqa@example.org"
    assert began["Subject"] == f"gqa: job {job.id} (train) began"
    assert ended["Subject"] == f"gqa: job {job.id} (train) failed (exit 3)"
    assert f"gqa status {job.id}" in ended.get_content()
    assert sender.deliver_due() == 0            # delivered: never again
    assert len(mail.mails) == 2


def test_the_owner_is_reached_through_the_mail_domain(queue, mail):
    sender = sender_for(queue, smtp=mail.address, mail_from="gqa@example.org", mail_domain="lab.example.org")
    queue.start(owner="ana", notify={"events": ["begin"]})
    sender.deliver_due()
    assert mail.wait_for(1)[0]["To"] == "ana@lab.example.org"


def test_a_webhook_gets_slack_json(queue, hook):
    sender = sender_for(queue, webhook=hook.url())      # the default when the job names no address
    job = queue.start(notify={"events": ["begin"]})
    assert sender.deliver_due() == 1
    [body] = hook.wait_for(1)
    assert body["type"] == "application/json" and body["path"] == "/hook"
    assert list(body["json"]) == ["text"] and f"job {job.id}" in body["json"]["text"]
    assert "began" in body["json"]["text"]


def test_a_receiver_that_is_down_gets_the_notice_once_it_is_back(queue, caplog):
    port = free_port()
    sender = sender_for(queue, webhook=f"http://127.0.0.1:{port}/hook")
    job = queue.start(notify={"events": ["begin"]})
    with caplog.at_level(logging.WARNING, "gqa.notices"):
        assert sender.deliver_due() == 0                 # refused: kept
        queue.clock.advance(backoff(1))
        assert sender.deliver_due() == 0
    assert [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()][:1], "said once"
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 1
    assert sender.deliver_due() == 0                     # not due again before its backoff
    back = HookReceiver(port).start()
    try:
        queue.clock.advance(backoff(2))
        assert sender.deliver_due() == 1
        assert f"job {job.id}" in back.wait_for(1)[0]["json"]["text"]
        queue.clock.advance(3600)
        assert sender.deliver_due() == 0 and len(back.bodies) == 1
    finally:
        back.stop()


def test_a_sender_killed_mid_send_sends_once_more_at_most(queue, hook):
    sender = sender_for(queue, webhook=hook.url())
    queue.start(notify={"events": ["begin"]})
    [pending] = sender.outbox.due(queue.clock.now())
    sender.outbox.trying(pending, queue.clock.now())     # the try was recorded; the daemon died sending it
    restarted = sender_for(queue, webhook=hook.url())
    assert restarted.deliver_due() == 0                  # not before the backoff
    queue.clock.advance(backoff(1))
    assert restarted.deliver_due() == 1
    queue.clock.advance(3600)
    assert restarted.deliver_due() == 0
    assert len(hook.wait_for(1)) == 1


def test_gives_up_after_max_tries_with_a_log_line(queue, caplog):
    sender = sender_for(queue, webhook=f"http://127.0.0.1:{free_port()}/hook")
    job = queue.start(notify={"events": ["begin"]})
    with caplog.at_level(logging.WARNING, "gqa.notices"):
        for _ in range(MAX_TRIES):
            sender.deliver_due()
            queue.clock.advance(backoff(MAX_TRIES))
    assert sender.outbox.outcomes() == {f"{job.id}.1.running": "gave up"}
    assert any(f"gave up on {job.id}.1.running" in r.getMessage() and f"after {MAX_TRIES} tries" in r.getMessage()
               for r in caplog.records)


def test_end_notices_tell_the_runs_not_the_waits_and_a_job_that_never_started(queue, hook):
    sender = sender_for(queue, webhook=hook.url())
    retried = queue.start(notify={"events": ["end"]}, retries={"on_error": 1})
    queue.clock.advance(600)
    queue.exit(retried.id, 1)                            # ran 10m; back in the queue after a backoff
    queue.clock.advance(3)
    never = queue.submit_one(notify={"events": ["end"]}, hold=True)
    queue.control.cancel([retried.id, never.id])         # both while pending
    assert sender.deliver_due() == 2
    told = {body["json"]["text"].split()[2]: body["json"]["text"] for body in hook.wait_for(2)}   # "gqa: job 12 ..."
    assert "Ran 10m00s on 1 GPU;" in told[retried.id]     # not the 10m03s to the cancel
    assert "before it started." in told[never.id] and "attempt 0" not in told[never.id]
    assert "Ran" not in told[never.id]


def test_nobody_to_send_to_is_skipped_not_retried(queue):
    sender = sender_for(queue)
    job = queue.start(notify={"events": ["begin"]})      # no address, no domain, no webhook
    assert sender.deliver_due() == 0
    assert sender.outbox.outcomes() == {f"{job.id}.1.running": "skipped"}


def test_without_a_channel_notices_are_skipped_for_good_as_the_daemons_log_says(queue, hook):
    sender = sender_for(queue)
    job = queue.start(notify={"events": ["begin"]})
    assert sender.deliver_due() == 0
    restarted = sender_for(queue, webhook=hook.url())    # a channel configured later: no backlog of stale notices
    assert restarted.deliver_due() == 0 and hook.bodies == []
    assert restarted.outbox.outcomes() == {f"{job.id}.1.running": "skipped"}
    said = NoticeSettings().describe()
    assert "kept" not in said and "skipped and never sent, not even after a restart" in said


def test_alerts_and_approval_requests_go_to_alerts_to_once(queue, hook):
    sender = sender_for(queue, alerts_to=hook.url("/alerts"))
    notifier = OutboxNotifier(sender.outbox, queue.clock, hook.url("/alerts"))
    for _ in range(2):   # the same alert twice the same day is one notice
        notifier.notify("gqa: 2 GPUs idle", "GPUs 0 and 1 idle for 30 minutes", kind="idle", team="vision")
    assert sender.deliver_due() == 1
    [body] = hook.wait_for(1)
    assert body["path"] == "/alerts" and body["json"]["text"].startswith("gqa: 2 GPUs idle\n")


def test_a_requeue_and_a_timeout_are_told(queue, hook):
    sender = sender_for(queue, webhook=hook.url())
    job = queue.start(notify={"events": ["requeue", "time_limit"]}, limits={"wall_time": "1m"},
                      retries={"on_error": 1})
    queue.exit(job.id, 1)                                # an error retried: requeued
    assert queue.state(job.id) == JobState.RETRY_WAIT
    assert sender.deliver_due() == 1
    assert "was requeued" in hook.wait_for(1)[0]["json"]["text"]


def awaiting_approval(queue, events: list[str]):
    """A 2-GPU job of bob's, named big, over an approval threshold of 1 GPU."""
    from gqa.ports import Inventory
    from gqa.scheduling import Policy
    from gqa.services.submit import SubmitService
    from tests.builders import gpus, spec

    queue.store.set_inventory(Inventory(gpus=gpus(4)))
    queue.store.set_policy(Policy(approval_gpus=1))
    [job] = SubmitService(queue.store, queue.clock).submit(
        spec(owner="bob", name="big", resources={"gpus": 2}, notify={"events": events}))
    assert job.state == JobState.PENDING_APPROVAL
    return job


@pytest.mark.parametrize("events", [["fail"], ["end"], ["all"]])
def test_a_denied_job_tells_its_owner_with_the_approvers_reason(queue, hook, events):
    sender = sender_for(queue, webhook=hook.url("/owner"))
    job = awaiting_approval(queue, events)
    queue.control.deny([job.id], caller="carol", reason="too big today")
    assert queue.state(job.id) == JobState.REJECTED
    assert sender.deliver_due() == 1
    [body] = hook.wait_for(1)
    text = body["json"]["text"]
    assert text.startswith(f"gqa: job {job.id} (big) was rejected\n") and "before it started" in text
    assert "too big today" in text


def test_an_outbox_made_by_an_earlier_gqa_tells_rejections_once_reopened(queue, hook):
    outbox = NoticeOutbox(queue.store.path)
    with outbox.db:   # the trigger as an earlier gqa made it, without REJECTED
        [sql] = outbox.db.execute("SELECT sql FROM sqlite_master WHERE name = 'notices_of_moves'").fetchone()
        outbox.db.execute("DROP TRIGGER notices_of_moves")
        outbox.db.execute(sql.replace(", 'REJECTED'", ""))
    outbox.close()
    sender = sender_for(queue, webhook=hook.url())          # the daemon started again by the new gqa
    job = awaiting_approval(queue, ["fail"])
    queue.control.deny([job.id], caller="carol", reason="too big today")
    assert sender.deliver_due() == 1 and "was rejected" in hook.wait_for(1)[0]["json"]["text"]


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")   # loopback, in a test
def test_mail_logs_in_with_the_login_file(queue, tmp_path):
    login = tmp_path / "smtp-login"
    login.write_text("gqa:pa:ss\n")
    login.chmod(0o600)
    mail = MailReceiver(login=("gqa", "pa:ss")).start()
    try:
        sender = sender_for(queue, smtp=mail.address, mail_from="gqa@example.org", login_file=str(login))
        queue.start(notify={"events": ["begin"], "to": "ana@example.org"})
        assert sender.deliver_due() == 1
        assert mail.wait_for(1)[0]["To"] == "ana@example.org" and mail.logins == ["gqa"]
    finally:
        mail.stop()


def test_an_approval_request_reaches_alerts_to(queue, hook):
    from gqa.ports import Inventory
    from gqa.scheduling import Policy
    from gqa.services.submit import SubmitService
    from tests.builders import gpus, spec

    sender = sender_for(queue, alerts_to=hook.url("/approvers"))
    queue.store.set_inventory(Inventory(gpus=gpus(4)))
    queue.store.set_policy(Policy(approval_gpus=1))
    service = SubmitService(queue.store, queue.clock, notifier=OutboxNotifier(sender.outbox, queue.clock,
                                                                              hook.url("/approvers")))
    [job] = service.submit(spec(owner="bob", resources={"gpus": 2}))
    assert job.state == JobState.PENDING_APPROVAL
    assert sender.deliver_due() == 1
    [body] = hook.wait_for(1)
    assert body["path"] == "/approvers" and f"gqa approve {job.id}" in body["json"]["text"]


def test_a_receiver_down_is_tried_for_about_twenty_minutes_as_the_readme_says():
    waited = sum(backoff(tries) for tries in range(1, MAX_TRIES))     # between the first try and the last
    assert 20 * 60 <= waited <= 25 * 60 and waited == 1411.5
