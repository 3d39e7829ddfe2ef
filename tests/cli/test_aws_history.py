"""`gqa history` against a whole deployment on moto: the job's life through
the functions, then its summary read back through GET /history, as the
local queue would print it."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.aws, pytest.mark.slow]


def test_a_finished_job_is_in_everyones_history_with_its_wait_and_run(aws):
    code, out, err = aws("alice", "submit", "--gpus", "1", "--name", "bert", "--", "python", "train.py")
    assert code == 0, err
    aws.admit()
    [submitted] = aws.dispatch()
    aws.world.clock.advance(60)
    aws.reconcile(submitted, "RUNNING")
    running = aws.json("bob", "history")["jobs"]
    assert [(j["id"], j["status"]) for j in running] == [("1", "running")]
    aws.world.clock.advance(1800)
    aws.reconcile(submitted, "SUCCEEDED", exit_code=0)
    [job] = aws.json("bob", "history", "--state", "completed")["jobs"]
    assert (job["id"], job["name"], job["owner"], job["exit"], job["elapsed"]) == ("1", "bert", "alice", "0", 1800.0)
    assert round(job["wait"]) == 60 and job["cost"] > 0   # submission to Batch's start
    assert aws.json("bob", "history", "--state", "failed")["jobs"] == []
    code, out, _ = aws("bob", "history", "-o", "csv")
    assert code == 0 and out.splitlines()[1].startswith("1,bert,default,alice,completed,")
    assert aws.gateway.seen[-1]["url"].split("?")[0].endswith("/history")
