"""`gqa report` on the AWS backend: the history's rows through GET /history,
the pools through GET /overview and the budgets through the quota routes, on a
whole deployment on moto."""

from __future__ import annotations

from datetime import datetime

import pytest

from gqa.reporting import FIGURES


@pytest.mark.slow
def test_report_through_the_api_counts_the_jobs_that_ran(aws, tmp_path):
    for name in ("bert", "gpt"):
        code, _, err = aws("alice", "submit", "--gpus", "1", "--time", "2h", "--name", name, "--", "python", "t.py")
        assert code == 0, err
    aws.admit()
    first, second = aws.dispatch()
    for submitted in (first, second):
        aws.reconcile(submitted, "RUNNING")
    aws.world.clock.advance(1800)
    aws.reconcile(first, "SUCCEEDED", exit_code=0)
    aws.reconcile(second, "FAILED", exit_code=3)
    gpus = {job["id"]: job["gpus"] for job in (aws.json("alice", "status", i) for i in ("1", "2"))}
    # the functions' clock ran on: the period ends after it
    until = datetime.fromtimestamp(aws.world.clock.now() + 60).isoformat(timespec="seconds")
    data = aws.json("alice", "report", "--since", "1d", "--until", until, "--out", str(tmp_path / "aws"))
    report = data["report"]
    assert report["jobs"] == 2
    assert (report["outcomes"]["succeeded"], report["outcomes"]["failed"]) == (1, 1)
    [team] = report["teams"]
    assert team["team"] == "default" and team["gpu_hours"] == pytest.approx(sum(gpus.values()) * 0.5, abs=0.01)
    assert team["cost"] > 0
    # the pools and their sizes are the overview's GPUs; it has no prices: jobs never reclaimed ran on demand
    pools = {p["pool"]: (p["gpus"], p["gpu_hours"]) for p in report["pools"]}
    assert pools == {"a10g on demand": (4, pytest.approx(team["gpu_hours"], abs=0.01)), "a10g spot": (8, 0.0)}
    assert sorted(data["figures"]) == sorted(FIGURES)
    assert (tmp_path / "aws" / "report.html").read_text().count("data:image/png;base64,") == len(FIGURES)
