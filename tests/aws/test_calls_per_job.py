"""The calls-per-job goal, held by the benchmark's own count (benchmarks/
aws_calls_per_job.py): jobs' whole lives through the real code on moto, every
AWS call counted through botocore's hooks."""

import pytest

from benchmarks.aws_calls_per_job import STEPS, lives

pytestmark = [pytest.mark.aws, pytest.mark.slow]


def test_a_job_submitted_with_others_costs_at_most_ten_calls_and_an_idle_pass_one():
    life = lives(20, job_seconds=3600)

    assert life.per_job_total() <= 10
    # an attempt's start (from Batch's RUNNING event; wall time, spend and fair share count from
    # it) is one guarded write that reads nothing, and wakes no pass
    assert life.step("reconcile RUNNING") == 1
    assert life.calls.count("reconcile RUNNING") == {("dynamodb", "UpdateItem"): 20}
    assert sum(life.idle_pass.values()) == 1
    # every step was counted, and the dispatch step is mostly the one SubmitJob per job
    assert all(life.step(name) > 0 for name in STEPS)
    assert life.per_job()[("batch", "SubmitJob")] == 20


def test_one_job_alone_is_counted_the_same_way():
    alone = lives(1, job_seconds=600)

    assert alone.per_job()[("batch", "SubmitJob")] == 1
    assert alone.per_job_total() <= 19
