"""The job-side GPU sampler: nvidia-smi's answer to one EMF line on stdout."""

import io
import json
import time

import pytest

from gqa.runtime.gpu_metrics import GpuSampler, emf_line, parse_utilisation, start_gpu_sampler, visible_devices


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the sampler thread never got there"
        time.sleep(0.005)


@pytest.mark.parametrize("env, devices", [
    ({}, []),                                             # unset: every GPU
    ({"CUDA_VISIBLE_DEVICES": "0,2"}, ["0", "2"]),
    ({"CUDA_VISIBLE_DEVICES": "GPU-1a2b, GPU-3c4d"}, ["GPU-1a2b", "GPU-3c4d"]),
    ({"CUDA_VISIBLE_DEVICES": ""}, None),                 # no GPU at all
    ({"CUDA_VISIBLE_DEVICES": "-1"}, None),
])
def test_visible_devices(env, devices):
    assert visible_devices(env) == devices


def test_parse_skips_what_is_not_a_number():
    assert parse_utilisation("87\n[N/A]\n 3 \n") == [87.0, 3.0]


def test_a_sample_is_one_emf_line_with_the_mean_of_the_jobs_gpus():
    asked, out = [], io.StringIO()

    def query(devices):
        asked.append(devices)
        return "10\n30\n"
    sampler = GpuSampler("12_3", ["0", "2"], query, out=out, clock=lambda: 1_700_000_000.25)
    assert sampler.sample() == 20.0
    assert asked == [["0", "2"]]
    doc = json.loads(out.getvalue())
    assert doc == json.loads(emf_line("12_3", 20.0, 1_700_000_000.25))
    assert doc["_aws"] == {"Timestamp": 1_700_000_000_250, "CloudWatchMetrics": [{
        "Namespace": "gqa", "Dimensions": [["JobId"]], "Metrics": [{"Name": "GPUUtilization", "Unit": "Percent"}]}]}
    assert (doc["JobId"], doc["GPUUtilization"]) == ("12_3", 20.0)


def test_a_failing_nvidia_smi_prints_nothing():
    out = io.StringIO()

    def broken(devices):
        raise OSError("no driver")
    assert GpuSampler("1", [], broken, out=out).sample() is None
    assert GpuSampler("1", [], lambda d: "[N/A]\n", out=out).sample() is None
    assert out.getvalue() == ""


def test_the_background_thread_samples_until_stopped():
    out, seen = io.StringIO(), []

    def query(devices):
        seen.append(1)
        return "50\n"
    sampler = GpuSampler("1", [], query, interval=0.01, out=out).start()
    wait_for(lambda: len(seen) >= 3)
    sampler.stop()
    assert len(out.getvalue().splitlines()) >= 3


@pytest.mark.parametrize("env, executable", [
    ({}, "/usr/bin/nvidia-smi"),                                           # not under gqa
    ({"GQA_JOB_ID": "1", "GQA_GPU_METRICS": "0"}, "/usr/bin/nvidia-smi"),  # turned off
    ({"GQA_JOB_ID": "1", "CUDA_VISIBLE_DEVICES": ""}, "/usr/bin/nvidia-smi"),  # no GPUs
])
def test_the_sampler_stays_off(env, executable):
    assert start_gpu_sampler(env, executable=executable) is None


def test_the_sampler_stays_off_without_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert start_gpu_sampler({"GQA_JOB_ID": "1"}) is None


def test_the_sampler_runs_a_real_nvidia_smi(tmp_path):
    """A stand-in nvidia-smi on disk: the arguments gqa passes, the answer parsed."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\necho 40\necho 60\n")
    script.chmod(0o755)
    out = io.StringIO()
    sampler = start_gpu_sampler({"GQA_JOB_ID": "9", "CUDA_VISIBLE_DEVICES": "1,3"}, interval=3600, out=out,
                                executable=str(script))
    try:
        wait_for(out.getvalue)
    finally:
        sampler.stop()
    assert json.loads(out.getvalue().splitlines()[0])["GPUUtilization"] == 50.0
    assert (tmp_path / "args").read_text().split() == [
        "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "--id=1,3"]
