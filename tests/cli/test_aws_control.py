"""`gqa hold`, `gqa release` and `gqa update` against the AWS backend (the
CLI signs, API Gateway's part checks, the api handler answers, on moto): a
held job is passed over by the dispatcher until released, and starts with
what an update asked."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.aws, pytest.mark.slow]


def test_a_held_job_waits_until_released_and_runs_as_updated(aws):
    assert aws("alice", "submit", "--gpus", "2", "--time", "4h", "--", "python", "train.py")[:2] == (0, "1\n")
    aws.admit()

    assert aws("alice", "hold", "1")[:2] == (0, "job 1 held\n")     # stderr: the functions' own logs
    code, _, err = aws("bob", "release", "1")
    assert code == 2 and "job 1 belongs to alice; bob may not release it" in err
    assert aws.dispatch() == []
    assert aws.json("alice", "status", "1")["state"] == "HELD"

    code, out, _ = aws("alice", "update", "1", "--gpus", "1", "--time", "1h")
    assert (code, out) == (0, "job 1 updated (wall time 4h00m -> 1h00m, GPUs 2 -> 1)\n")
    assert aws("alice", "release", "1")[:2] == (0, "job 1 released\n")
    [submitted] = aws.dispatch()
    status = aws.json("alice", "status", "1")
    assert (status["state"], status["gpus"], len(status["assigned_gpus"])) == ("STARTING", 1, 1)
    assert [h["reason"] for h in status["history"]][-3:-1] == ["held by alice", "released by alice"]
    code, _, err = aws("alice", "update", "1", "--gpus", "2")
    assert code == 2 and "job 1 is starting; only a pending job can be updated" in err
    assert submitted.batch_job_id
