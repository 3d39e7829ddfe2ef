"""GPU readings for the tests: GQA_TEST_GPUS=<file> makes the daemon read its
GPUs through an NVML-like module whose figures come from that JSON file,
read again at each call, so a test changes what the GPUs do while jobs run:

    {"gpus": {"0": {"util": 3, "memory": 1024, "total": 24576, "power": 150}},
     "sample_every": 0.2, "write_every": 0.5, "watch_every": 0.5}

(memory in MiB, power in watts; the intervals in seconds override the
daemon's). Unset, the real NVML is used where it loads, and this costs
nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

VARIABLE = "GQA_TEST_GPUS"
MIB = 1024 * 1024


def settings_from_env(env: dict[str, str] | None = None) -> dict | None:
    path = (os.environ if env is None else env).get(VARIABLE, "")
    return json.loads(Path(path).read_text()) if path else None


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(f"simulated NVML error {value}")
        self.value = value


class SimulatedNvml:
    """The few functions of pynvml the adapter calls, with pynvml's names."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = 3

    def __init__(self, path: str):
        self.path = Path(path)

    def _gpu(self, handle: int) -> dict:
        return json.loads(self.path.read_text())["gpus"][str(handle)]

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(json.loads(self.path.read_text())["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._gpu(handle)["util"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        gpu = self._gpu(handle)
        return SimpleNamespace(used=int(gpu["memory"] * MIB), total=int(gpu.get("total", 0) * MIB), free=0)

    def nvmlDeviceGetPowerManagementLimit(self, handle: int) -> int:
        power = self._gpu(handle).get("power")
        if power is None:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return int(power * 1000)


def simulated_nvml(env: dict[str, str] | None = None) -> SimulatedNvml | None:
    path = (os.environ if env is None else env).get(VARIABLE, "")
    return SimulatedNvml(path) if path else None
