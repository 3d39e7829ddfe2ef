"""`gqa logs ID [-f]` on the AWS backend: through the API (signed requests,
the fake API Gateway, the api function) to BatchLogs on moto's Batch and
CloudWatch Logs. moto runs no container: each test writes the attempt's log
stream itself, where Batch's awslogs driver would. Roles as in
fake_batch.ACCESS: root-ops is an admin, carol an approver."""

from __future__ import annotations

import time

import pytest

from tests.aws.fake_batch import RECLAIM

pytestmark = pytest.mark.aws


def running(aws, *lines: str):
    """Job 1 of alice's, started on Batch, its attempt having written `lines`."""
    assert aws.json("alice", "submit", "--gpus", "1", "--name", "bert", "--", "python", "train.py")["jobs"] == ["1"]
    aws.admit()
    [submitted] = aws.dispatch()
    aws.reconcile(submitted, "RUNNING")
    if lines:
        aws.write_log(submitted, *lines)
    return submitted


def test_the_owner_reads_the_output_of_a_running_job(aws):
    submitted = running(aws, "epoch 1 loss 0.9", "epoch 2 loss 0.5")
    code, out, err = aws("alice", "logs", "1")
    assert code == 0, err
    header, *lines = out.splitlines()
    assert header.startswith(f"--- gqa: attempt 1 of job 1 on Batch job {submitted.batch_job_id}")
    assert header.endswith(": python train.py")
    assert lines == ["epoch 1 loss 0.9", "epoch 2 loss 0.5"]
    sent = aws.gateway.seen[-1]
    assert sent["method"] == "GET" and "/jobs/1/logs" in sent["url"]
    code, out, _ = aws("alice", "logs", "1", "--tail", "1")
    assert code == 0 and out == "epoch 2 loss 0.5\n"


@pytest.mark.parametrize("who", ["bob", "carol"])
def test_nobody_else_reads_it_not_even_an_approver(aws, who):
    running(aws, "HF_TOKEN=hf_secret")
    code, out, err = aws(who, "logs", "1")
    assert code == 2 and out == "" and "hf_secret" not in err
    assert f"job 1 belongs to alice; {who} may not read its output" in err


def test_an_admin_reads_anyones_output(aws):
    running(aws, "done")
    code, out, _ = aws("root-ops", "logs", "1")
    assert code == 0 and out.splitlines()[1:] == ["done"]


def test_a_queued_job_has_no_output_yet_and_says_so(aws):
    aws.json("alice", "submit", "--", "true")
    aws.admit()
    code, out, err = aws("alice", "logs", "1")
    assert code == 0 and out == "" and "job 1 has not started yet" in err
    code, _, err = aws("alice", "logs", "77")
    assert code == 2 and "77" in err


def test_follow_waits_for_a_queued_job_then_prints_until_it_ends(aws, monkeypatch):
    """`gqa logs -f` on a queued job: NotStarted crosses the API by name, so the
    CLI waits; each of its waits moves the world on a step (Batch starts the
    job, it writes, it ends), and the command returns once the job has ended."""
    aws.json("alice", "submit", "--gpus", "1", "--", "python", "train.py")
    aws.admit()
    started: list = []

    def step():
        if not started:
            [submitted] = aws.dispatch()
            aws.reconcile(submitted, "RUNNING")
            aws.write_log(submitted, "step 1")
            started.append(submitted)
        elif len(started) == 1:
            aws.write_log(started[0], "step 2", "saved")
            aws.world.clock.advance(600)
            aws.reconcile(started[0], "SUCCEEDED", exit_code=0)
            started.append("ended")
        else:
            raise AssertionError("still polling after the job ended")
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", lambda seconds: (waits.append(seconds), step()))
    code, out, err = aws("alice", "logs", "-f", "1")
    assert code == 0, err
    assert "has not started yet" in err and "waiting for it to start" in err
    assert out.splitlines()[1:] == ["step 1", "step 2", "saved"]
    assert len(waits) == 2


def test_every_attempt_after_a_spot_reclaim_each_under_its_header(aws):
    first = running(aws, "attempt one: epoch 1")
    aws.world.clock.advance(60)
    aws.reconcile(first, "FAILED", reason=RECLAIM)
    aws.world.clock.advance(1000)                # past the backoff
    [second] = aws.dispatch()
    aws.reconcile(second, "RUNNING")
    aws.write_log(second, "attempt two: resumed", "attempt two: epoch 2")
    code, out, err = aws("alice", "logs", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"--- gqa: attempt 1 of job 1 on Batch job {first.batch_job_id}")
    assert lines[1] == "attempt one: epoch 1"
    assert lines[2].startswith(f"--- gqa: attempt 2 of job 1 on Batch job {second.batch_job_id}")
    assert lines[3:] == ["attempt two: resumed", "attempt two: epoch 2"]
    code, out, _ = aws("alice", "logs", "1", "--attempt", "2")
    assert code == 0 and out.splitlines()[1:] == ["attempt two: resumed", "attempt two: epoch 2"]
    code, out, err = aws("alice", "logs", "1", "--attempt", "3")
    assert code == 0 and out == "" and "attempt 3 has not started" in err
