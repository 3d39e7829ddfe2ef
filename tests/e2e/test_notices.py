"""Notices from a real daemon to real receivers: a Slurm job's mails, a
webhook's Slack JSON, and a receiver that hangs, which never holds up a
job's start and gets its notices once it answers again."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from gqa.adapters.local.notice_channels import NoticeSettings, write_settings
from tests.notice_receivers import HookReceiver, MailReceiver

pytestmark = pytest.mark.e2e


def started(make_queue, **settings):
    queue = make_queue(gpus=2, start=False)
    path = write_settings(queue.home, NoticeSettings(**settings))
    queue.start(options=("--notices-file", str(path)) if path else ())
    return queue


def test_a_slurm_job_asking_begin_and_end_gets_both_mails(make_queue):
    mail = MailReceiver().start()
    try:
        queue = started(make_queue, smtp=mail.address, mail_from="gqa@example.org")
        (queue.home / "run.sh").write_text("#!/bin/sh\n#SBATCH --job-name=train\n#SBATCH --mail-type=BEGIN,END\n"
                                           "#SBATCH --mail-user=ana@example.org\necho hello\n")
        job_id = queue.cli("submit", "run.sh", check=True).stdout.strip()
        assert queue.wait(job_id).state.value == "SUCCEEDED"
        mails = mail.wait_for(2)
        assert sorted(m["Subject"] for m in mails) == [f"gqa: job {job_id} (train) began",
                                                        f"gqa: job {job_id} (train) completed"]
        assert {m["To"] for m in mails} == {"ana@example.org"}
        time.sleep(1.0)                         # nothing more comes: each move is told once
        assert len(mail.mails) == 2
    finally:
        mail.stop()


def test_a_webhook_gets_slack_json(make_queue):
    hook = HookReceiver().start()
    try:
        queue = started(make_queue)
        job_id = queue.cli("submit", "--notify", f"end,fail:{hook.url('/services/T1')}", "--gpus", "1", "--",
                           "sh", "-c", "exit 4", check=True).stdout.strip()
        assert queue.wait(job_id).state.value == "FAILED"
        [body] = hook.wait_for(1)
        assert body["path"] == "/services/T1" and body["type"] == "application/json"
        assert body["json"]["text"].startswith(f"gqa: job {job_id} (sh) failed (exit 4)\n")
    finally:
        hook.stop()


@pytest.mark.slow
def test_a_receiver_that_hangs_never_delays_a_start_and_gets_its_notices_once_back(make_queue):
    hook = HookReceiver(mode="hang").start()
    try:
        queue = started(make_queue, webhook=hook.url())
        waits = []
        ids = []
        for _ in range(2):   # the second is submitted while the sender waits on the first notice
            submitted = time.monotonic()
            [job_id] = queue.submit(["sleep", "0.2"], notify={"events": ["begin"]})
            queue.wait(job_id, states=("RUNNING", "SUCCEEDED"), timeout=10)
            waits.append(time.monotonic() - submitted)
            ids.append(job_id)
        assert max(waits) < 2.0, f"starts took {waits} s with a webhook that hangs"
        hook.mode = "ok"
        hook.released.set()                     # the hanging requests end unanswered: tried again
        bodies = hook.wait_for(2, timeout=40)
        time.sleep(1.0)
        assert len(hook.bodies) == 2
        assert sorted(b["json"]["text"].split("\n")[0] for b in bodies) == \
            sorted(f"gqa: job {i} (job) began" for i in ids)
    finally:
        hook.stop()


SECRET = "T0SECRET/B0SECRET/XXXXSECRETTOKEN"


def test_webhook_urls_are_on_no_command_line_and_in_no_log(make_queue):
    """Every user of the machine reads a process's arguments: the daemon gets its settings in a file
    only its user reads, and its log shows a URL's scheme and host alone."""
    queue = make_queue(gpus=1, start=False)
    hook, alerts = f"https://hooks.slack.com/services/{SECRET}", f"https://alerts.example.org/{SECRET}/x"
    started = queue.cli_json("local", "start", "--gpus", "1", "--detach", "--webhook", hook, "--alerts-to", alerts)
    cmdline = Path(f"/proc/{started['pid']}/cmdline").read_bytes().decode()
    assert "SECRET" not in cmdline and "--notices-file" in cmdline
    settings = queue.home / "notices.json"
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert [p.name for p in queue.home.iterdir() if p.name.startswith(".notices-")] == []   # renamed into place
    line = next(x for x in (queue.home / "daemon.log").read_text().splitlines() if "notices: " in x)
    assert "SECRET" not in line
    assert "webhook https://hooks.slack.com/…" in line and "alerts to https://alerts.example.org/…" in line
    assert queue.cli_json("local", "stop")["stopped"]
    # started again without them: the old file goes, and the daemon has no channel
    queue.cli("local", "start", "--gpus", "1", "--detach", check=True)
    assert not settings.exists()
    assert (queue.home / "daemon.log").read_text().count("notices: no channel configured") == 1
