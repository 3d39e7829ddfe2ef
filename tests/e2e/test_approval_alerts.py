"""A job awaiting approval on a queue started without --alerts-to: its
approval request reaches the daemon's log, as the budget watch's alerts do,
and so, once, does its wait for an approver past --alert-pending-after."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest

pytestmark = pytest.mark.e2e


def wait_for(check, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found


def test_an_approval_request_and_its_overdue_wait_reach_the_daemons_log(make_queue, tmp_path, monkeypatch):
    gpus = tmp_path / "gpus.json"   # simulated GPUs, only so that the budget watch runs every 0.2 s
    gpus.write_text(json.dumps({"gpus": {str(i): {"util": 90, "memory": 0, "total": 24576} for i in range(2)},
                                "sample_every": 0.1, "write_every": 0.2, "watch_every": 0.2}))
    monkeypatch.setenv("GQA_TEST_GPUS", str(gpus))
    queue = make_queue(gpus=2)
    store = queue.backend.store
    store.set_policy(replace(store.policy(), approval_gpus=1, alert_pending_after=1.0))
    # the real executable: its submit is served by the daemon
    proc = subprocess.run([sys.executable, "-c", "from cli.client import run; run()", "submit", "--gpus", "2",
                           "-J", "big", "-o", "json", "--", "true"], env=queue.env, cwd=str(queue.home),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    job = json.loads(proc.stdout)["id"]
    assert queue.job(job).state.value == "PENDING_APPROVAL"

    daemon_log = queue.home / "daemon.log"
    request = f"alert (approval, team default): gqa: job {job} (big) from "
    wait_for(lambda: request in daemon_log.read_text(), "the approval request is not in the daemon's log")
    assert f"gqa approve {job}" in daemon_log.read_text()
    overdue = f"alert (approval, team default): gqa: job {job} (big) from {queue.job(job).owner} has waited "
    wait_for(lambda: overdue in daemon_log.read_text(), "no alert of the wait for approval past 1s")
    time.sleep(1.0)                                                       # five more ticks of the watch
    text = daemon_log.read_text()
    assert text.count(request) == 2 and text.count(overdue) == 1          # the request, and one overdue alert
