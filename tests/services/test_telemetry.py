"""The metrics each function emits (services/telemetry.py), from the
services' results, on a recording Metrics port: names, units, values and
dimensions, table-driven."""

from __future__ import annotations

import pytest

from gqa.models.job import JobState
from gqa.ports import Inventory
from gqa.scheduling import Gpu
from gqa.services import telemetry
from gqa.services.reconcile import Action, Reconciled
from tests.builders import history, job_record, pending, running
from tests.services.fakes import RecordingMetrics

S = JobState


@pytest.mark.parametrize("steps, wait", [
    (("SUBMITTED@0", "QUEUED@10", "STARTING@70", "RUNNING@75"), 60.0),            # first start
    (("QUEUED@0", "HELD@20", "QUEUED@100", "STARTING@130"), 130.0),               # a budget hold is waiting too
    (("QUEUED@0", "STARTING@10", "RUNNING@11", "RETRY_WAIT@50", "QUEUED@80", "STARTING@95"), 15.0),  # latest
    (("PENDING_APPROVAL@0", "QUEUED@500", "STARTING@520"), 20.0),                 # approval is not queueing
    (("QUEUED@0",), None),                                                        # not started
    (("STARTING@5",), None),                                                      # no wait recorded
    ((), None),                                                                   # no history read
])
def test_queue_wait_runs_from_the_last_unbroken_wait_to_the_start(steps, wait):
    assert telemetry.queue_wait(job_record(history=history(*steps))) == wait


def test_admission_counts_by_tier_with_zeros():
    metrics = RecordingMetrics()
    counts = telemetry.admitted([job_record(tier=0, state=S.QUEUED), job_record(tier=0, state=S.HELD),
                                 job_record(tier=2, state=S.REJECTED), job_record(tier=2, state=S.PENDING_APPROVAL)])
    telemetry.admission(metrics, counts)
    assert metrics.flushed == [
        ({"tier": "high"}, {"JobsAdmitted": 2, "JobsAwaitingApproval": 0, "JobsRejected": 0}),
        ({"tier": "low"}, {"JobsAdmitted": 0, "JobsAwaitingApproval": 1, "JobsRejected": 1})]


def test_nothing_admitted_emits_nothing():
    metrics = RecordingMetrics()
    telemetry.admission(metrics, telemetry.admitted([]))
    assert metrics.flushed == []


def test_a_pass_reports_its_starts_waits_queue_and_gpus():
    metrics = RecordingMetrics()
    started = [job_record(id="1", history=history("QUEUED@0", "STARTING@40")),
               job_record(id="2", history=history("QUEUED@30", "STARTING@40"))]
    report = telemetry.PassReport(started, pending=[pending("3"), pending("4")],
                                  running=[running("1", gpus=(0, 1)), running("2", gpus=(2,))],
                                  inventory=Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(8))),
                                  repaired=1, recovered=2)
    telemetry.dispatch_pass(metrics, report, duration=0.4567)
    (dims, values), *_ = metrics.series
    assert dims == {}
    assert values == {"JobsStarted": [2], "PassDuration": [0.457], "PendingJobs": [2], "HeldGpus": [3],
                      "FreeGpus": [5], "RepairedLaunches": [1], "LostEventsRecovered": [2], "QueueWait": [40.0, 10.0]}
    assert metrics.units["QueueWait"] == "Seconds" and metrics.units["FreeGpus"] == "Count"


def test_an_idle_pass_still_reports_the_free_gpus():
    metrics = RecordingMetrics()
    telemetry.dispatch_pass(metrics, telemetry.PassReport([], [], [], Inventory(gpus=(Gpu(0, "a10g"),))), 0.01)
    (_, values), *_ = metrics.flushed
    assert (values["JobsStarted"], values["FreeGpus"], values["HeldGpus"]) == (0, 1, 0)
    assert "QueueWait" not in values


POOLS = Inventory(gpus=(*(Gpu(i, "a10g", spot=True) for i in range(4)), Gpu(4, "a10g"), Gpu(5, "a10g"),
                        *(Gpu(i, "h100", spot=True) for i in (6, 7))))


@pytest.mark.parametrize("running_gpus, by_pool", [
    ((), {"a10g-spot": (0, 4), "a10g-ondemand": (0, 2), "h100-spot": (0, 2)}),                 # idle: zeros
    (((0, 1), (4,)), {"a10g-spot": (2, 2), "a10g-ondemand": (1, 1), "h100-spot": (0, 2)}),
    (((6, 7), (5,), (2,)), {"a10g-spot": (1, 3), "a10g-ondemand": (1, 1), "h100-spot": (2, 0)}),
])
def test_a_pass_reports_the_held_and_free_gpus_of_each_pool(running_gpus, by_pool):
    metrics = RecordingMetrics()
    report = telemetry.PassReport([], [pending("9")], [running(str(n), gpus=g) for n, g in enumerate(running_gpus)],
                                  POOLS)
    telemetry.dispatch_pass(metrics, report, 0.1)
    per_pool = {dims["pool"]: (values["HeldGpus"], values["FreeGpus"]) for dims, values in metrics.flushed
                if "pool" in dims}
    assert per_pool == by_pool
    assert all(set(dims) <= {"pool"} for dims, _ in metrics.flushed)    # a pool's figures carry no other dimension
    totals = metrics.flushed[0][1]
    assert (totals["HeldGpus"], totals["FreeGpus"]) == tuple(map(sum, zip(*by_pool.values())))


def test_a_gpu_no_longer_in_the_inventory_counts_in_no_pool():
    metrics = RecordingMetrics()
    telemetry.dispatch_pass(metrics, telemetry.PassReport([], [], [running("1", gpus=(9,))], POOLS), 0.1)
    assert {dims["pool"]: values["HeldGpus"] for dims, values in metrics.flushed if "pool" in dims} == \
        {"a10g-spot": 0, "a10g-ondemand": 0, "h100-spot": 0}


def test_a_pass_without_an_inventory_reports_no_pools():
    metrics = RecordingMetrics()
    telemetry.dispatch_pass(metrics, telemetry.PassReport([], [], [running("1")], None), 0.1)
    assert [dims for dims, _ in metrics.flushed] == [{}]


@pytest.mark.parametrize("gpu_type, spot", [("a10g", True), ("a100", False), ("h100_80g", True)])
def test_a_pool_is_named_as_the_aws_backend_names_it(gpu_type, spot):
    from gqa.adapters.aws.resources import Pool
    assert telemetry.pool_name(gpu_type, spot) == Pool(gpu_type, spot, max_gpus=1, price=0.0).name


def settled(state: JobState, cause: str, *, team: str = "vision", seconds: float = 7200.0, cost: float = 3.0):
    job = job_record(state=state, spec={"team": team})
    return Reconciled(Action.SETTLED, job, "why", cause, seconds, cost)


@pytest.mark.parametrize("state, cause, counts, retry", [
    (S.SUCCEEDED, "app", {"JobsSucceeded": 1}, None),
    (S.FAILED, "app", {"JobsFailed": 1}, None),
    (S.FAILED, "oom", {"JobsFailed": 1, "OutOfMemory": 1}, None),
    (S.RETRY_WAIT, "oom", {"OutOfMemory": 1}, "oom"),
    (S.RETRY_WAIT, "reclaimed", {"SpotReclaims": 1}, "reclaimed"),
    (S.RETRY_WAIT, "capacity", {"CapacityFailures": 1}, "capacity"),
    (S.FAILED, "capacity", {"JobsFailed": 1, "CapacityFailures": 1}, None),   # out of capacity retries
    (S.TIMED_OUT, "timeout", {"JobsTimedOut": 1}, None),
    (S.RETRY_WAIT, "preempt", {}, "preempt"),
    (S.CANCELLED, "cancel", {"JobsCancelled": 1}, None),
])
def test_a_settlement_counts_how_the_job_went_on_and_what_ended_the_attempt(state, cause, counts, retry):
    metrics = RecordingMetrics()
    telemetry.settlement(metrics, settled(state, cause))
    flushed = [f for f in metrics.flushed if "team" not in f[0]]
    expected = ([({}, counts)] if counts else []) + ([({"kind": retry}, {"Retries": 1})] if retry else [])
    assert flushed == expected
    assert metrics.flushed[-1] == ({"team": "vision"}, {"GpuHours": 2.0, "Cost": 3.0})


def test_an_event_that_settled_nothing_emits_nothing():
    metrics = RecordingMetrics()
    telemetry.settlement(metrics, Reconciled(Action.IGNORED, job_record(), "duplicate"))
    telemetry.settlement(metrics, Reconciled(Action.RUNNING, job_record(state=S.RUNNING), "started"))
    assert metrics.flushed == []


def test_a_pass_emits_the_settlements_of_lost_events_too():
    metrics = RecordingMetrics()
    report = telemetry.PassReport([], [], [], None, recovered=1, settlements=[settled(S.SUCCEEDED, "app")])
    telemetry.dispatch_pass(metrics, report, 0.1)
    assert ({}, {"JobsSucceeded": 1}) in metrics.flushed and metrics.flushed[0][1]["LostEventsRecovered"] == 1


def test_trigger_bursts_and_objects():
    metrics = RecordingMetrics()
    telemetry.objects_counted(metrics, 3)
    telemetry.bursts_closed(metrics, ["submitted", "nothing to close", "dropped", "submitted"])
    telemetry.bursts_closed(metrics, ["nothing to close", "already submitted"])     # nothing worth a point
    assert metrics.flushed == [({}, {"TriggerObjects": 3}), ({}, {"TriggerBursts": 2, "TriggerBurstsDropped": 1})]
