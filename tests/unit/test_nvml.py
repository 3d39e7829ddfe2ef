"""The NVML adapter over an NVML-like module with pynvml's names: readings by
gqa's GPU index, and NVML's errors read by their code."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gqa.adapters.local.nvml import NvmlGpus
from gqa.models.errors import BackendUnavailable

MIB = 1024 * 1024


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(f"error {value}")
        self.value = value


class FakeNvml:
    """Three GPUs; `fail` maps (function, index) to the NVML error code it raises."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_GPU_IS_LOST = 15

    def __init__(self, fail: dict | None = None, init_error: int | None = None):
        self.fail, self.init_error = fail or {}, init_error
        self.inits = self.shutdowns = 0

    def _maybe(self, name: str, index: int) -> None:
        if (name, index) in self.fail:
            raise NVMLError(self.fail[name, index])

    def nvmlInit(self):
        self.inits += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return 3

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._maybe("util", handle)
        return SimpleNamespace(gpu=10 * (handle + 1), memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._maybe("memory", handle)
        return SimpleNamespace(used=(handle + 1) * 1000 * MIB, total=24000 * MIB, free=0)

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        self._maybe("power", handle)
        return 150_000 + handle * 1000


def figures(readings):
    return {i: (r.utilization, r.memory_used, r.memory_total) for i, r in readings.items()}


def test_readings_are_keyed_by_gqa_index_and_a_virtual_gpu_past_nvmls_is_never_read():
    gpus = NvmlGpus(FakeNvml(), [0, 2, 7], clock=lambda: 5.0)
    readings = gpus.read()
    assert figures(readings) == {0: (10.0, 1000.0, 24000.0), 2: (30.0, 3000.0, 24000.0)}
    assert {r.at for r in readings.values()} == {5.0}
    assert gpus.power_limits() == {0: 150.0, 2: 152.0}


@pytest.mark.parametrize("fail, expected", [
    # a figure the GPU does not support is None, the rest of the reading stays
    ({("util", 1): 3}, {0: (10.0, 1000.0, 24000.0), 1: (None, 2000.0, 24000.0)}),
    ({("memory", 0): 3}, {0: (10.0, None, None), 1: (20.0, 2000.0, 24000.0)}),
    # a GPU that is lost is left out of this reading; the others answer
    ({("util", 0): 15}, {1: (20.0, 2000.0, 24000.0)}),
    ({("memory", 1): 999}, {0: (10.0, 1000.0, 24000.0)}),
])
def test_errors_of_one_figure_or_one_gpu(fail, expected):
    assert figures(NvmlGpus(FakeNvml(fail), [0, 1]).read()) == expected


@pytest.mark.parametrize("code", [9, 12, 4])    # no driver, no library, no permission
def test_nvml_that_cannot_start_is_unavailable_by_its_code(code):
    with pytest.raises(BackendUnavailable, match=f"NVML error {code}"):
        NvmlGpus(FakeNvml(init_error=code), [0]).read()


def test_nvml_lost_while_reading_is_unavailable_and_a_power_limit_not_supported_is_absent():
    with pytest.raises(BackendUnavailable):
        NvmlGpus(FakeNvml({("util", 0): 12}), [0]).read()
    assert NvmlGpus(FakeNvml({("power", 0): 3}), [0, 1]).power_limits() == {1: 151.0}


def test_opened_once_and_shut_down_on_close():
    nvml = FakeNvml()
    gpus = NvmlGpus(nvml, [0])
    gpus.read()
    gpus.read()
    gpus.close()
    gpus.close()
    assert (nvml.inits, nvml.shutdowns) == (1, 1)


def test_real_nvml_where_the_library_is_present():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"no NVML on this machine: {exc}")
    count = pynvml.nvmlDeviceGetCount()
    pynvml.nvmlShutdown()
    if count == 0:
        pytest.skip("NVML loads but sees no GPU")
    gpus = NvmlGpus(pynvml, range(count))
    try:
        readings = gpus.read()
        limits = gpus.power_limits()
    finally:
        gpus.close()
    assert sorted(readings) == list(range(count))
    for r in readings.values():
        assert r.utilization is None or 0 <= r.utilization <= 100
        assert r.memory_total is None or 0 <= r.memory_used <= r.memory_total
    assert all(w > 0 for w in limits.values())
