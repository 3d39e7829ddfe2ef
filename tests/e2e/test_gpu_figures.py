"""The daemon's GPU sampling and budget watch over a simulated GPU
(GQA_TEST_GPUS: an NVML-like module the real adapter reads): a running job
gets its utilisation and memory on its record, a finished one keeps them,
and a GPU idle past the policy's window raises one alert in the daemon's log."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest


def wait_for(check, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found


@pytest.mark.slow
def test_running_and_finished_jobs_carry_their_gpu_figures_and_an_idle_gpu_alerts(make_queue, tmp_path,
                                                                                   monkeypatch):
    gpus = tmp_path / "gpus.json"

    def simulate(util: float, memory: float) -> None:
        gpus.write_text(json.dumps({"gpus": {"0": {"util": util, "memory": memory, "total": 24576}},
                                    "sample_every": 0.1, "write_every": 0.2, "watch_every": 0.2}))

    simulate(7, 1500)
    monkeypatch.setenv("GQA_TEST_GPUS", str(gpus))
    queue = make_queue(gpus=1)
    store = queue.backend.store
    store.set_policy(replace(store.policy(), idle_gpu_percent=50.0, idle_gpu_window=0.5))
    [job] = queue.submit(["sleep", "30"], resources={"gpus": 1})
    running = wait_for(lambda: (j := queue.job(job)).gpu_util is not None and j, "no figures on the running job")
    assert (running.gpu_util, running.gpu_memory) == (7.0, 1500.0)
    shown = queue.cli_json("status", job)
    assert (shown["gpu_util"], shown["gpu_memory"]) == (7.0, 1500.0)
    assert "gpu use    7% mean utilisation, 1.5 GiB peak memory" in queue.cli("status", job, check=True).stdout

    daemon_log = queue.home / "daemon.log"
    idle = f"gqa: job {job} GPUs idle"
    wait_for(lambda: idle in daemon_log.read_text(), "no idle alert: 7% is under the policy's 50%")
    simulate(0, 3000)
    wait_for(lambda: queue.job(job).gpu_memory == 3000.0, "the new peak was not written")
    queue.cli("cancel", job, check=True)
    done = queue.wait(job)
    assert done.state.value == "CANCELLED"
    assert 0 <= done.gpu_util < 7.0 and done.gpu_memory == 3000.0     # the mean fell; the peak stays
    assert daemon_log.read_text().count(idle) == 1


def test_a_machine_without_nvml_runs_without_readings_said_once(make_queue, monkeypatch):
    from gqa.adapters.local.nvml import NvmlGpus, load_nvml
    from gqa.models.errors import BackendUnavailable

    try:
        NvmlGpus(load_nvml(), [0]).read()
        pytest.skip("NVML works on this machine")
    except BackendUnavailable:
        pass
    monkeypatch.delenv("GQA_TEST_GPUS", raising=False)
    queue = make_queue(gpus=1)
    [job] = queue.submit(["true"], resources={"gpus": 1})
    done = queue.wait(job)
    assert done.state.value == "SUCCEEDED" and done.gpu_util is None and done.gpu_memory is None
    assert (queue.home / "daemon.log").read_text().count("GPU utilisation is not sampled on this machine") == 1
