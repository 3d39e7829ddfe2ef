"""Compute on AWS Batch (moto as an API stub): the SubmitJob request a launch
makes (captured as built, since moto keeps only some fields), the pool its
GPU slots pick, and what DescribeJobs answers mean for alive() and reap()
(FAILED answers are written in the shape AWS documents: moto's jobs succeed)."""

from __future__ import annotations

import os
from dataclasses import replace
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from gqa.adapters.aws import batch_compute
from gqa.adapters.aws.batch_compute import BatchCompute, batch_job_from, job_name
from gqa.adapters.aws.resources import Pool
from gqa.adapters.aws.s3_checkpoints import S3Checkpoints
from gqa.models.errors import BackendUnavailable, LaunchFailed, LaunchUncertain
from gqa.models.outcome import ExitKind
from gqa.ports import Exit
from tests.aws.moto_support import FakeClock, answer, capture, create_batch, refuse, session
from tests.builders import job_record
from tests.contract.conftest import FAKE_AWS

pytestmark = pytest.mark.aws
BUCKET = "gqa-ckpt"
POOLS = (
    Pool("a10g", spot=True, max_gpus=4, price=0.5, instance_gpus=4),
    Pool("a10g", spot=False, max_gpus=2, price=1.2, job_queue="gqa-a10g-od"),
    Pool("h100", spot=False, max_gpus=8, price=6.0),
)


@pytest.fixture
def aws():
    with mock.patch.dict(os.environ, FAKE_AWS), mock_aws(config={"batch": {"use_docker": False}}):
        create_batch(session(), POOLS, ("gqa-train", "gqa-custom"))
        batch = session().client("batch")
        s3 = session().client("s3")
        s3.create_bucket(Bucket=BUCKET)
        yield batch, s3


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def compute(aws, clock) -> BatchCompute:
    batch, s3 = aws
    sleeps: list[float] = []
    made = BatchCompute(batch, POOLS, "gqa-train", S3Checkpoints(s3, BUCKET, "checkpoints"), clock,
                        images={"ghcr.io/lab/custom:2": "gqa-custom"}, sleep=sleeps.append, attempts=3)
    made.sleeps = sleeps  # type: ignore[attr-defined]
    return made


def job(**overrides):
    spec = overrides.pop("spec", {})
    return job_record(id=overrides.pop("id", "12"), spec=spec, **overrides)


def launched_request(compute: BatchCompute, record, gpus, attempt: int = 1) -> tuple[dict, str]:
    calls = capture(compute.client, "SubmitJob")
    out = compute.launch(record, gpus, attempt)
    assert out.pid == 0
    [request] = calls
    return request, out.token


def env_of(request: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in request["containerOverrides"]["environment"]}


def resources_of(request: dict) -> dict[str, str]:
    return {r["type"]: r["value"] for r in request["containerOverrides"]["resourceRequirements"]}


# -- inventory ------------------------------------------------------------------------------------------

def test_inventory_numbers_each_pools_slots_consecutively(compute):
    gpus = compute.inventory().gpus
    assert [g.index for g in gpus] == list(range(14))
    assert [(g.type, g.spot, g.price) for g in gpus[3:5]] == [("a10g", True, 0.5), ("a10g", False, 1.2)]
    assert {g.pool for g in gpus[6:]} == {("h100", False)}
    assert compute.inventory().cpus is None and compute.inventory().memory is None


def test_two_pools_of_one_type_and_purchase_option_are_refused(aws, clock):
    with pytest.raises(ValueError, match="both a10g spot"):
        BatchCompute(aws[0], POOLS + (Pool("a10g", True, 2, 0.4, job_queue="other"),), "d", None, clock)


# -- launch ---------------------------------------------------------------------------------------------

def test_launch_submits_to_the_pools_queue_with_everything_the_job_needs(compute, aws):
    batch, s3 = aws
    s3.put_object(Bucket=BUCKET, Key="checkpoints/12/latest", Body=b"ckpt-40")
    s3.put_object(Bucket=BUCKET, Key="checkpoints/12/ckpt-40/.gqa-manifest.json", Body=b"{}")
    record = job(spec={"name": "bert.finetune", "team": "nlp", "command": ["python", "train.py", "--lr", "3e-4"],
                       "env": {"WANDB_PROJECT": "bert"}, "resources": {"gpus": 2, "cpus": 16, "memory": "60Gi"},
                       "limits": {"wall_time": "4h"}, "checkpoint": {"grace": "90s"}, "tags": {"project": "bert"}},
                 attempts=2)

    request, token = launched_request(compute, record, (7, 8), attempt=3)

    assert request["jobQueue"] == "gqa-h100-ondemand"
    assert request["jobDefinition"] == "gqa-train"
    assert request["jobName"] == "gqa-12-3-bert-finetune"
    assert request["containerOverrides"]["command"] == ["python", "train.py", "--lr", "3e-4"]
    assert resources_of(request) == {"GPU": "2", "VCPU": "16", "MEMORY": str(60 * 1024)}
    own = {k: v for k, v in env_of(request).items() if not k.startswith("SLURM_") and "_NUM_THREADS" not in k}
    assert own == {"WANDB_PROJECT": "bert", "GQA_JOB_ID": "12", "GQA_ATTEMPT": "3",
                   "GQA_CHECKPOINT_URI": f"s3://{BUCKET}/checkpoints/12/",
                   "GQA_RESUME_FROM": f"s3://{BUCKET}/checkpoints/12/ckpt-40"}   # Slurm's: test_batch_slurm_env.py
    assert request["timeout"] == {"attemptDurationSeconds": 4 * 3600 + 90}
    assert request["retryStrategy"] == {"attempts": 1}
    assert request["propagateTags"] is True
    assert request["tags"] == {"gqa:team": "nlp", "gqa:job-id": "12", "gqa:owner": "alice", "gqa:attempt": "3",
                               "gqa:pool": "h100-ondemand", "project": "bert"}
    [described] = batch.describe_jobs(jobs=[token])["jobs"]
    assert described["jobName"] == "gqa-12-3-bert-finetune"


def test_defaults_without_cpus_memory_wall_time_or_checkpoint(compute):
    record = job(id="3_4", spec={"resources": {"gpus": 3}}, array_index=4, extra_env={"LR": "0.1"})

    request, _ = launched_request(compute, record, (0, 1, 2))

    assert request["jobQueue"] == "gqa-a10g-spot"
    assert resources_of(request) == {"GPU": "3", "VCPU": "12", "MEMORY": str(3 * 14 * 1024)}
    assert "timeout" not in request
    env = env_of(request)
    assert (env["GQA_RESUME_FROM"], env["GQA_ARRAY_INDEX"], env["LR"]) == ("", "4", "0.1")
    assert "CUDA_VISIBLE_DEVICES" not in env          # Batch hands the container its GPUs


@pytest.mark.parametrize("spec, gpu_seconds, expected", [
    ({"limits": {"wall_time": "10s"}}, 0.0, 60),                                   # Batch's minimum
    ({"limits": {"wall_time": "1h", "max_gpu_hours": 0.5}}, 0.0, 1800 + 10),       # the budget comes first
    ({"limits": {"wall_time": "1h", "max_gpu_hours": 2}}, 3600.0, 3600 + 10),      # half used: still 1h
    ({"limits": {"max_gpu_hours": 1}}, 3000.0, 600 + 10),                          # 10 min left, 1 GPU
    ({"limits": {"max_gpu_hours": 1}}, 3590.0, 60),                                # 10 s left: the minimum
], ids=["minimum", "budget", "budget-partly-used", "budget-mostly-used", "budget-nearly-used"])
def test_the_timeout_is_the_attempts_limit_plus_grace(compute, spec, gpu_seconds, expected):
    request, _ = launched_request(compute, job(spec=spec, gpu_seconds=gpu_seconds), (8,))
    assert request["timeout"] == {"attemptDurationSeconds": expected}


def test_job_names_keep_to_batchs_rules():
    assert job_name(job(spec={"name": "a.b_c-d"}), 1) == "gqa-12-1-a-b_c-d"
    long = job_name(job(id="99999_12", spec={"name": "x" * 63}), 10**60)
    assert long.startswith("gqa-99999_12-1000") and len(long) == 128


def test_a_spec_image_needs_a_job_definition(compute):
    request, _ = launched_request(compute, job(spec={"image": "ghcr.io/lab/custom:2"}), (0,))
    assert request["jobDefinition"] == "gqa-custom"
    with pytest.raises(LaunchFailed, match="no job definition runs image"):
        compute.launch(job(spec={"image": "docker.io/other:1"}), (0,), 1)


@pytest.mark.parametrize("gpus, why", [
    ((3, 4), "span pools"),
    ((99,), "belong to no pool"),
    ((), "no GPUs"),
], ids=["two-pools", "unknown-slot", "none"])
def test_slots_that_name_no_single_pool_fail_the_launch(compute, gpus, why):
    calls = capture(compute.client, "SubmitJob")
    with pytest.raises(LaunchFailed, match=why):
        compute.launch(job(), gpus, 1)
    assert calls == []


def test_a_gang_larger_than_the_pools_instances_fails_the_launch(compute, monkeypatch):
    small = replace(POOLS[0], instance_gpus=2)
    monkeypatch.setitem(compute._pool_of, 0, small)
    with pytest.raises(LaunchFailed, match="at most 2"):
        compute.launch(job(spec={"resources": {"gpus": 3}}), (0, 1, 2), 1)


def test_batch_reserved_variables_fail_the_launch_with_their_names(compute):
    with pytest.raises(LaunchFailed, match="AWS_BATCH_X"):
        compute.launch(job(extra_env={"AWS_BATCH_X": "1"}), (0,), 1)


def test_invalid_user_tags_are_left_out_not_fatal(compute):
    request, _ = launched_request(compute, job(spec={"tags": {"ok": "a b", "aws:x": "1", "gqa:team": "evil",
                                                             "bad": "semi;colon"}}), (0,))
    assert {k: v for k, v in request["tags"].items() if not k.startswith("gqa:")} == {"ok": "a b"}
    assert request["tags"]["gqa:team"] == "default"


@pytest.mark.parametrize("definition_tags, kept", [(1, 44), (10, 35), (0, 45)])
def test_a_jobs_tags_leave_room_for_its_definitions_read_once(compute, aws, definition_tags, kept):
    """Batch fails a job (after accepting it) whose tags and its definition's pass 50: the
    definition's, however many the deployment gave it, are read once, and the spec's fill the rest."""
    aws[0].register_job_definition(jobDefinitionName="gqa-train", type="container", propagateTags=True,
                                   containerProperties={"image": "i", "command": ["true"], "resourceRequirements": [
                                       {"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "512"}]},
                                   tags={f"stack{i}": "x" for i in range(definition_tags)})
    calls = capture(compute.client, "DescribeJobDefinitions")
    record = job(spec={"tags": {f"k{i:02d}": "v" for i in range(60)}})
    for attempt in (1, 2):
        request, _ = launched_request(compute, record, (0,), attempt)    # the limits layer refuses more
        assert len(request["tags"]) == 5 + kept == 50 - definition_tags
        assert [k for k in request["tags"] if not k.startswith("gqa:")] == [f"k{i:02d}" for i in range(kept)]
    assert len(calls) == 1


def test_a_definition_retagged_by_a_deployment_is_read_again_after_a_while(compute, aws, clock):
    def definition(tags: int) -> None:
        aws[0].register_job_definition(
            jobDefinitionName="gqa-train", type="container", propagateTags=True,
            tags={f"s{i}": "x" for i in range(tags)},
            containerProperties={"image": "i", "command": ["true"], "resourceRequirements": [
                {"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "512"}]})

    few = job(spec={"tags": {f"k{i:02d}": "v" for i in range(batch_compute.FEW_TAGS)}})
    many = job(spec={"tags": {f"k{i:02d}": "v" for i in range(60)}})
    calls = capture(compute.client, "DescribeJobDefinitions")
    assert len(launched_request(compute, few, (0,))[0]["tags"]) == 40 and calls == []      # room for 10: no call
    assert len(launched_request(compute, many, (0,))[0]["tags"]) == 49 and len(calls) == 1
    clock.t += batch_compute.DEFINITION_TAGS_TTL - 1
    assert len(launched_request(compute, many, (0,))[0]["tags"]) == 49 and len(calls) == 1  # kept a while
    definition(20)                     # a new revision: the next deployment's stack tags
    clock.t += 1
    assert len(launched_request(compute, many, (0,))[0]["tags"]) == 30 and len(calls) == 2


def test_the_limits_layer_refuses_what_batch_would_fail(aws):
    batch = aws[0]
    with pytest.raises(ClientError, match="51 tags of the job and its job definition together; at most 50"):
        batch.submit_job(jobName="j", jobQueue="gqa-a10g-od", jobDefinition="gqa-train", propagateTags=True,
                         tags={f"k{i}": "v" for i in range(50)})
    batch.submit_job(jobName="j", jobQueue="gqa-a10g-od", jobDefinition="gqa-train", propagateTags=False,
                     tags={f"k{i}": "v" for i in range(50)})                 # not propagated: not counted


def test_a_missing_job_queue_fails_the_launch(compute, aws):
    aws[0].update_job_queue(jobQueue="gqa-a10g-od", state="DISABLED")
    aws[0].delete_job_queue(jobQueue="gqa-a10g-od")
    with pytest.raises(LaunchFailed, match="ClientException"):
        compute.launch(job(), (4,), 1)


def test_submit_is_retried_only_when_batch_refused_it_for_rate(compute):
    refused = refuse(compute.client, "SubmitJob", "TooManyRequestsException", times=2)
    assert compute.launch(job(), (0,), 1).token
    assert refused == ["SubmitJob"] * 2 and len(compute.sleeps) == 2

    # a server error may follow a job Batch did create: never submit twice, and say it is uncertain
    refused = refuse(compute.client, "SubmitJob", "ServerException", times=1)
    with pytest.raises(LaunchUncertain):
        compute.launch(job(), (0,), 1)
    assert refused == ["SubmitJob"]


# -- terminate, alive, reap -----------------------------------------------------------------------------

def test_terminate_sends_the_reason_to_the_batch_job(compute):
    token = compute.launch(job(), (0,), 1).token
    calls = capture(compute.client, "TerminateJob")

    compute.terminate(job(proc_token=token, kill_reason="cancel"), grace=30)
    compute.terminate(job(proc_token=None), grace=30)          # never launched: nothing to stop

    assert [(c["jobId"], c["reason"]) for c in calls] == [(token, "gqa: cancel")]


def test_terminating_a_job_batch_no_longer_knows_is_a_no_op(compute):
    refused = refuse(compute.client, "TerminateJob", "ClientException", times=1)
    compute.terminate(job(proc_token="gone", kill_reason="cancel"), grace=30)
    assert refused == ["TerminateJob"]


def test_a_succeeded_batch_job_reaps_as_exit_code_zero(compute):
    token = compute.launch(job(), (0,), 1).token
    record = job(proc_token=token, attempts=1)

    assert compute.alive(record) is False
    assert compute.reap(record) == Exit("12", 1, 0, None)
    compute.cleanup(record)


def described(status: str, *, reason: str | None = None, exit_code: int | None = None,
              container_reason: str | None = None, job_id: str = "b-1") -> dict:
    """One job of a DescribeJobs answer, in the shape AWS documents."""
    out: dict = {"jobId": job_id, "jobName": "gqa-12-train", "jobQueue": "q", "jobDefinition": "d",
                 "status": status, "startedAt": 1, "attempts": [], "container": {}}
    if reason:
        out["statusReason"] = reason
    if exit_code is not None or container_reason:
        container = {k: v for k, v in (("exitCode", exit_code), ("reason", container_reason)) if v is not None}
        out["attempts"] = [{"container": container, "startedAt": 1, "stoppedAt": 2,
                            "statusReason": "Essential container in task exited"}]
        out["container"] = dict(container)
    return out


@pytest.mark.parametrize("answer_job, alive, exit_code, reaped, kind", [
    (described("RUNNABLE"), True, None, False, None),
    (described("STARTING"), True, None, False, None),
    (described("RUNNING"), True, None, False, None),
    (described("SUCCEEDED", exit_code=0), False, 0, True, ExitKind.APP),
    (described("FAILED", exit_code=3), False, 3, True, ExitKind.APP),
    (described("FAILED", exit_code=137, container_reason="OutOfMemoryError: Container killed due to memory usage"),
     False, 137, True, ExitKind.OOM),
    (described("FAILED", reason="Host EC2 (instance i-0abc) terminated."), False, None, True,   # spot reclaim
     ExitKind.RECLAIMED),
], ids=["runnable", "starting", "running", "succeeded", "failed", "oom", "never-ran"])
def test_describe_jobs_answers_mean(compute, answer_job, alive, exit_code, reaped, kind):
    answer(compute.client, "DescribeJobs", {"jobs": [answer_job]})
    record = job(proc_token="b-1", attempts=2)

    assert compute.alive(record) is alive
    ended = compute.reap(record)
    if reaped:
        assert (ended.job_id, ended.attempt, ended.code, ended.signal, ended.kind) == ("12", 2, exit_code, None, kind)
    else:
        assert ended is None


def test_the_reason_batch_gives_is_kept_for_the_services(compute):
    answer(compute.client, "DescribeJobs", {"jobs": [described(
        "FAILED", reason="Host EC2 (instance i-0abc) terminated.")]})
    assert "Host EC2 (instance i-0abc) terminated." in compute.reap(job(proc_token="b-1", attempts=1)).detail


def test_a_job_batch_does_not_know(compute):
    record = job(proc_token="no-such-job", attempts=1)
    assert compute.alive(record) is False
    assert compute.reap(record) is None


def test_describe_is_read_once_per_ttl_and_many_at_once(compute, clock):
    calls = capture(compute.client, "DescribeJobs")
    record = job(proc_token=compute.launch(job(), (0,), 1).token, attempts=1)

    compute.alive(record), compute.reap(record)
    assert len(calls) == 1
    clock.t += compute.status_ttl + 0.1
    compute.alive(record)
    assert len(calls) == 2

    records = [job(id=str(i), proc_token=f"b-{i}") for i in range(150)]
    compute.prime(records)
    assert [len(c["jobs"]) for c in calls[2:]] == [100, 50]
    assert all(compute.alive(r) is False for r in records) and len(calls) == 4


def test_describe_throttling_is_retried_then_unavailable(compute):
    refused = refuse(compute.client, "DescribeJobs", "TooManyRequestsException", times=2)
    assert compute.alive(job(proc_token="b-1")) is False
    assert len(refused) == 2
    refuse(compute.client, "DescribeJobs", "TooManyRequestsException", times=10)
    with pytest.raises(BackendUnavailable):
        compute.alive(job(proc_token="b-2"))


def test_a_state_change_event_reads_like_a_describe_answer():
    event = {"detail-type": "Batch Job State Change", "source": "aws.batch", "detail": {
        "jobId": "b-9", "jobName": "gqa-12-1-train", "status": "FAILED",
        "statusReason": "Host EC2 (instance i-0abc) terminated.",
        "attempts": [{"container": {"taskArn": "t"}, "statusReason": "Host EC2 (instance i-0abc) terminated."}],
        "container": {}}}
    read = batch_job_from(event["detail"])
    assert (read.job_id, read.status, read.exit_code) == ("b-9", "FAILED", None)
    assert read.status_reason == "Host EC2 (instance i-0abc) terminated."


# -- attempts whose events were lost (the AttemptStatus port) ------------------------------------------

def test_attempts_now_reads_each_recorded_attempt_as_batch_would_report_it(compute):
    launched = job(proc_token=compute.launch(job(), (0,), 1).token, attempts=1)
    forgotten = job(id="13", proc_token="no-such-job", attempts=2)
    unlaunched = job(id="14", proc_token=None)

    found = compute.attempts_now([launched, forgotten, unlaunched])

    assert set(found) == {"12", "13"}                   # no Batch job recorded: nothing to ask
    assert found["13"] is None                          # Batch does not know it
    event = found["12"]
    assert (event.job_id, event.attempt, event.batch_job_id) == ("12", 1, launched.proc_token)
    assert event.status in ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED")   # moto's


def test_attempts_now_asks_a_hundred_a_call_and_its_answers_serve_alive_and_reap(compute):
    calls = capture(compute.client, "DescribeJobs")
    records = [job(id=str(i), proc_token=f"b-{i}", attempts=1) for i in range(150)]

    found = compute.attempts_now(records)

    assert [len(c["jobs"]) for c in calls] == [100, 50]
    assert found == {str(i): None for i in range(150)}
    assert compute.alive(records[0]) is False and len(calls) == 2


def test_attempts_now_reads_times_and_reasons_from_the_answer(compute):
    reclaimed = dict(described("FAILED", reason="Host EC2 (instance i-0abc) terminated."),
                     jobName="gqa-12-3-train", startedAt=1_700_000_000_000, stoppedAt=1_700_000_600_000)
    answer(compute.client, "DescribeJobs", {"jobs": [reclaimed, dict(described("RUNNING", job_id="b-2"),
                                                                     jobName="gqa-99-1-other")]})

    found = compute.attempts_now([job(proc_token="b-1", attempts=3), job(id="13", proc_token="b-2", attempts=1)])

    event = found["12"]
    assert (event.attempt, event.status, event.status_reason) == (3, "FAILED", "Host EC2 (instance i-0abc) terminated.")
    assert (event.started_at, event.time) == (1_700_000_000.0, 1_700_000_600.0)
    assert "13" not in found            # an answer about another job than the one recorded is not taken
