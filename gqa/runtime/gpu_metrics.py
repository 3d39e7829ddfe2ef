"""GPU utilisation of this job as CloudWatch metrics, for the idle-GPU alert.

A background thread asks nvidia-smi for the utilisation of the job's GPUs
(those in CUDA_VISIBLE_DEVICES) once a minute and prints their mean as one
CloudWatch EMF line (embedded metric format) on stdout. On AWS Batch the
job's stdout goes to CloudWatch Logs, which turns each such line into a
datapoint of metric `GPUUtilization` (namespace `gqa`, dimension `JobId`):
no AWS call and no credentials in the job. Locally the lines land in the
job's log, harmlessly.

    from gqa.runtime import start_gpu_sampler
    start_gpu_sampler()          # None (and nothing happens) without nvidia-smi or outside gqa

Standard library only, like the rest of gqa.runtime."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TextIO

NAMESPACE = "gqa"
METRIC = "GPUUtilization"
DIMENSION = "JobId"
INTERVAL = 60.0
_NO_DEVICES = {"", "-1", "none", "nodevfiles"}

Query = Callable[[list[str]], str]


def nvidia_smi_query(executable: str) -> Query:
    """A query that runs nvidia-smi for the given device ids (all GPUs for [])."""
    def query(devices: list[str]) -> str:
        argv = [executable, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
        if devices:
            argv.append(f"--id={','.join(devices)}")
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    return query


def visible_devices(environ: Mapping[str, str]) -> list[str] | None:
    """The job's GPUs from CUDA_VISIBLE_DEVICES: [] for all (unset), None for none."""
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return []
    if raw.strip().lower() in _NO_DEVICES:
        return None
    return [d.strip() for d in raw.split(",") if d.strip()]


def parse_utilisation(text: str) -> list[float]:
    """nvidia-smi's csv,noheader,nounits answer: one number per GPU ("[N/A]" skipped)."""
    out = []
    for line in text.splitlines():
        try:
            out.append(float(line.strip()))
        except ValueError:
            continue
    return out


def emf_line(job_id: str, percent: float, at: float, namespace: str = NAMESPACE) -> str:
    document = {"_aws": {"Timestamp": int(at * 1000), "CloudWatchMetrics": [{
        "Namespace": namespace, "Dimensions": [[DIMENSION]],
        "Metrics": [{"Name": METRIC, "Unit": "Percent"}]}]},
        DIMENSION: job_id, METRIC: round(percent, 2)}
    return json.dumps(document, separators=(",", ":"))


class GpuSampler:
    """Prints the mean utilisation of `devices` every `interval` seconds until stopped."""

    def __init__(self, job_id: str, devices: list[str], query: Query, *, interval: float = INTERVAL,
                 out: TextIO | None = None, clock: Callable[[], float] = time.time):
        self.job_id, self.devices, self.query = job_id, devices, query
        self.interval, self.out, self.clock = interval, out, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> float | None:
        """One reading, printed; None (and nothing printed) if nvidia-smi gave no number."""
        try:
            values = parse_utilisation(self.query(self.devices))
        except (OSError, subprocess.SubprocessError):
            return None
        if not values:
            return None
        mean = sum(values) / len(values)
        stream = self.out or sys.stdout
        stream.write(emf_line(self.job_id, mean, self.clock()) + "\n")   # one write: lines never interleave
        stream.flush()
        return mean

    def start(self) -> GpuSampler:
        self._thread = threading.Thread(target=self._run, name="gqa-gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


def start_gpu_sampler(environ: Mapping[str, str] | None = None, *, interval: float = INTERVAL,
                      out: TextIO | None = None, executable: str | None = None) -> GpuSampler | None:
    """Start sampling in the background, if this runs under gqa (GQA_JOB_ID),
    has GPUs and nvidia-smi is on PATH; GQA_GPU_METRICS=0 turns it off."""
    env = os.environ if environ is None else environ
    job_id = env.get("GQA_JOB_ID", "").strip()
    if not job_id or env.get("GQA_GPU_METRICS", "").strip() == "0":
        return None
    devices = visible_devices(env)
    executable = executable or shutil.which("nvidia-smi")
    if devices is None or executable is None:
        return None
    return GpuSampler(job_id, devices, nvidia_smi_query(executable), interval=interval, out=out).start()
