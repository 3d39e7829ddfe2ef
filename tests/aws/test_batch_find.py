"""BatchCompute.find (the LaunchLookup port): an attempt found on Batch by
its job name with ListJobs' JOB_NAME filter on moto, and SubmitJob failures
that leave Batch's side unknown (LaunchUncertain) or known (BackendUnavailable)."""

from __future__ import annotations

import pytest
from botocore.exceptions import EndpointConnectionError

from gqa.adapters.aws.batch_compute import found_launch
from gqa.models.errors import BackendUnavailable, LaunchUncertain, Misconfigured
from gqa.models.outcome import ExitKind
from gqa.ports import Exit
from tests.aws.moto_support import capture, refuse
from tests.aws.test_batch_compute import POOLS, aws, clock, compute, job  # noqa: F401  (fixtures)

pytestmark = pytest.mark.aws


def test_find_returns_the_attempt_batch_holds_and_none_for_one_it_never_received(compute):
    launched = compute.launch(job(id="12"), (0,), 3)
    compute.launch(job(id="12"), (0,), 30)         # gqa-12-30-...: the filter's prefix matches it too
    compute.launch(job(id="1"), (0,), 3)           # gqa-1-3-...
    calls = capture(compute.client, "ListJobs")

    found = compute.find(job(id="12", assigned=(0,)), 3)

    assert found is not None and found.launched.token == launched.token and found.launched.pid == 0
    assert found.submitted_at is not None
    assert found.ended == Exit("12", 3, 0, None, ExitKind.APP, "")      # moto's jobs succeed at once
    assert [(c["jobQueue"], c["filters"]) for c in calls] == [
        (POOLS[0].queue_name, [{"name": "JOB_NAME", "values": ["gqa-12-3-*"]}])]
    assert compute.find(job(id="12", assigned=(0,)), 4) is None
    assert compute.find(job(id="12", assigned=(4,)), 3) is None         # not on the on-demand pool's queue


def test_without_assigned_gpus_every_pool_queue_is_searched(compute):
    launched = compute.launch(job(id="7"), (6,), 1)          # the h100 pool
    calls = capture(compute.client, "ListJobs")
    found = compute.find(job(id="7", assigned=()), 1)
    assert found is not None and found.launched.token == launched.token
    assert [c["jobQueue"] for c in calls] == [p.queue_name for p in POOLS]


@pytest.mark.parametrize("summary, ended", [
    ({"status": "RUNNABLE"}, None),
    ({"status": "RUNNING", "startedAt": 2_000_500}, None),
    ({"status": "SUCCEEDED", "startedAt": 2_000_500, "stoppedAt": 2_900_000, "container": {"exitCode": 0}},
     Exit("5", 2, 0, None, ExitKind.APP, "")),
    ({"status": "FAILED", "statusReason": "Host EC2 (instance i-0abc) terminated.", "startedAt": 2_000_500,
      "stoppedAt": 2_100_000}, Exit("5", 2, None, None, ExitKind.RECLAIMED, "Host EC2 (instance i-0abc) terminated.")),
    ({"status": "FAILED", "statusReason": "Task failed to start",
      "container": {"reason": "CannotPullContainerError: denied"}, "stoppedAt": 2_100_000},
     Exit("5", 2, None, None, ExitKind.CAPACITY, "CannotPullContainerError: denied")),
])
def test_a_job_summary_becomes_a_found_launch(summary, ended):
    raw = {"jobId": "b-1", "jobName": "gqa-5-2-train", "createdAt": 2_000_000, **summary}
    found = found_launch(job(id="5"), 2, raw)
    assert (found.launched.token, found.submitted_at) == ("b-1", 2000.0)
    assert found.started_at == (raw["startedAt"] / 1000 if "startedAt" in raw else None)
    assert found.ended == ended
    assert found.ended_at == (raw["stoppedAt"] / 1000 if "stoppedAt" in raw else None)


@pytest.mark.parametrize("code, error", [
    ("InternalError", LaunchUncertain),            # Batch failed on its side: the job may exist
    ("ServiceUnavailable", LaunchUncertain),
    ("AccessDeniedException", Misconfigured),       # refused: it surely does not
])
def test_a_submit_failure_says_whether_batch_may_hold_the_job(compute, code, error):
    refuse(compute.client, "SubmitJob", code, times=1)
    with pytest.raises(error) as raised:
        compute.launch(job(), (0,), 1)
    assert raised.type is error


def test_throttling_past_the_retries_is_a_refusal_not_an_uncertainty(compute):
    refuse(compute.client, "SubmitJob", "ThrottlingException", times=3)     # the fixture's 3 attempts
    with pytest.raises(BackendUnavailable):
        compute.launch(job(), (0,), 1)


def test_a_lost_answer_is_uncertain(compute):
    def lost(**_):
        raise EndpointConnectionError(endpoint_url="https://batch.us-east-1.amazonaws.com")
    compute.client.meta.events.register("before-call.batch.SubmitJob", lost)
    with pytest.raises(LaunchUncertain):
        compute.launch(job(), (0,), 1)
