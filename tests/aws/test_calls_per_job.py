"""The calls-per-job goal, held by the benchmark's own count (benchmarks/
aws_calls_per_job.py): jobs' whole lives through the real code on moto, every
AWS call counted through botocore's hooks."""

import pytest

from benchmarks.aws_calls_per_job import STEPS, lives

pytestmark = [pytest.mark.aws, pytest.mark.slow]


def test_a_job_submitted_with_others_costs_at_most_eleven_calls_and_an_idle_pass_one():
    life = lives(20, job_seconds=3600)

    # 10 before an attempt's start was its own write: its RUNNING event now reads the job and
    # records the start (wall time, spend and fair share count from Batch's start, not the launch)
    assert life.per_job_total() <= 11
    assert life.step("reconcile RUNNING") == 2
    assert sum(life.idle_pass.values()) == 1
    # every step was counted, and the dispatch step is mostly the one SubmitJob per job
    assert all(life.step(name) > 0 for name in STEPS)
    assert life.per_job()[("batch", "SubmitJob")] == 20


def test_one_job_alone_is_counted_the_same_way():
    alone = lives(1, job_seconds=600)

    assert alone.per_job()[("batch", "SubmitJob")] == 1
    assert alone.per_job_total() <= 20
