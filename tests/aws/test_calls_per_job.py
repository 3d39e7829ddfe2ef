"""The calls-per-job goal, held by the benchmark's own count (benchmarks/
aws_calls_per_job.py): jobs' whole lives through the real code on moto, every
AWS call counted through botocore's hooks, DynamoDB's units as it bills them."""

from collections import Counter

import pytest

from benchmarks.aws_calls_per_job import G5_XLARGE_PER_HOUR, STEPS, cost, lives
from gqa.adapters.aws.tables import CHANGE_SHARDS

pytestmark = [pytest.mark.aws, pytest.mark.slow]


def test_a_job_submitted_with_others_costs_at_most_ten_calls_and_an_idle_pass_a_query_a_shard():
    life = lives(20, job_seconds=3600)

    assert life.per_job_total() <= 10
    # an attempt's start (from Batch's RUNNING event; wall time, spend and fair share count from
    # it) is one guarded write that reads nothing, and wakes no pass
    assert life.step("reconcile RUNNING") == 1
    assert life.calls.count("reconcile RUNNING") == {("dynamodb", "UpdateItem"): 20}
    # a settlement's wake-up carries the ended job as written: with nothing waiting, its pass calls nothing
    assert life.calls.count("pass after it") == Counter()
    assert sum(life.idle_pass.values()) == CHANGE_SHARDS
    # every other step was counted, and the dispatch step is mostly the one SubmitJob per job
    assert all(life.step(name) > 0 for name in STEPS if name != "pass after it")
    assert life.per_job()[("batch", "SubmitJob")] == 20
    # the control plane's cost: at most a ten-thousandth of the GPU-hour a one-hour job takes
    assert 0 < sum(cost(life, 128, 0.2).values()) <= G5_XLARGE_PER_HOUR / 10_000
    assert life.read_units() > 0 and life.write_units() > life.read_units()


def test_one_job_alone_is_counted_the_same_way():
    alone = lives(1, job_seconds=600)

    assert alone.per_job()[("batch", "SubmitJob")] == 1
    # every container cold: the dispatcher's first pass reads the changes index whole (a Query a
    # shard) and the settings, ledger and run-time samples once; a job with few tags never asks
    # for its job definition's
    assert alone.per_job()[("batch", "DescribeJobDefinitions")] == 0
    assert alone.per_job_total() <= 22


def test_a_task_of_an_array_costs_its_own_start_events_and_pass():
    array = lives(100, job_seconds=3600, gpus=10, array=True)

    assert array.per_job()[("batch", "SubmitJob")] == 100
    assert array.step("submit (the API)") + array.step("admit") < 0.1   # one submission for them all
    # most tasks wait for one of the 10 GPUs: the pass each settlement wakes starts the next (its whole
    # item read, the ledger, the claim, SubmitJob, the record)
    assert array.step("pass after it") < 6
    assert array.per_job_total() <= 10.5
