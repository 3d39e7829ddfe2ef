"""This machine's GPUs through NVML (nvidia-ml-py's `pynvml`): utilisation,
memory and power limit, for the daemon's sampler and local prices.

The NVML module is a parameter: the real `pynvml`, or one with its names in
tests. NVML's errors become domain errors by their code, never their text:
no library, no driver, no permission -> BackendUnavailable (the machine is
not sampled); a figure a GPU does not support -> None; a GPU lost or not
answering -> left out of that reading (it may answer the next one).

gqa's GPU index is nvidia-smi's (gpu_discovery.py), which is NVML's index;
the executor pins jobs with CUDA_VISIBLE_DEVICES in the same PCI bus order."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from ...models.errors import BackendUnavailable
from ...ports.observe import GpuReading

MIB = 1024 * 1024
# NVML's return codes (nvml.h), read from the module when it names them
_UNAVAILABLE = {"NVML_ERROR_UNINITIALIZED": 1, "NVML_ERROR_NO_PERMISSION": 4, "NVML_ERROR_DRIVER_NOT_LOADED": 9,
                "NVML_ERROR_LIBRARY_NOT_FOUND": 12, "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
                "NVML_ERROR_INSUFFICIENT_POWER": 8, "NVML_ERROR_LIB_RM_VERSION_MISMATCH": 18}
_NOT_SUPPORTED = {"NVML_ERROR_NOT_SUPPORTED": 3}


def _codes(module: Any, names: dict[str, int]) -> set[int]:
    return {getattr(module, name, code) for name, code in names.items()}


def load_nvml() -> ModuleType:
    """The real NVML bindings; BackendUnavailable where the package is missing
    (the library itself is loaded by nvmlInit)."""
    try:
        import pynvml
    except ImportError:
        raise BackendUnavailable("GPU readings need the nvidia-ml-py package (pip install nvidia-ml-py)") from None
    return pynvml


class NvmlGpus:
    """GpuReadings over an NVML module. `indexes`: gqa's GPUs; one NVML does
    not know (a virtual GPU past the real ones) is never read."""

    def __init__(self, nvml: Any, indexes: Iterable[int], clock: Callable[[], float] = time.time):
        self.nvml, self.clock = nvml, clock
        self.indexes = sorted(set(indexes))
        self.unavailable = _codes(nvml, _UNAVAILABLE)
        self.not_supported = _codes(nvml, _NOT_SUPPORTED)
        self.handles: dict[int, Any] | None = None

    def open(self) -> None:
        """nvmlInit and the GPUs' handles; BackendUnavailable where NVML cannot be used here."""
        if self.handles is not None:
            return
        try:
            self.nvml.nvmlInit()
            count = self.nvml.nvmlDeviceGetCount()
            self.handles = {i: self.nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indexes if i < count}
        except self.nvml.NVMLError as exc:
            raise self._error(exc, "NVML cannot be used here") from None

    def close(self) -> None:
        if self.handles is None:
            return
        self.handles = None
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def read(self) -> dict[int, GpuReading]:
        self.open()
        assert self.handles is not None
        out = {}
        for index, handle in self.handles.items():
            try:
                rates = self._figure(self.nvml.nvmlDeviceGetUtilizationRates, handle)
                memory = self._figure(self.nvml.nvmlDeviceGetMemoryInfo, handle)
            except _Skipped:
                continue      # this GPU did not answer (lost, timed out): the others did
            out[index] = GpuReading(index, self.clock(), None if rates is None else float(rates.gpu),
                                    None if memory is None else memory.used / MIB,
                                    None if memory is None else memory.total / MIB)
        return out

    def power_limits(self) -> dict[int, float]:
        self.open()
        assert self.handles is not None
        out = {}
        for index, handle in self.handles.items():
            try:
                milliwatts = self._figure(self.nvml.nvmlDeviceGetPowerManagementLimit, handle)
            except _Skipped:
                continue
            if milliwatts:
                out[index] = milliwatts / 1000.0
        return out

    def _figure(self, read: Callable[[Any], Any], handle: Any) -> Any:
        """One figure of one GPU: None where the GPU does not support it."""
        try:
            return read(handle)
        except self.nvml.NVMLError as exc:
            code = _code(exc)
            if code in self.not_supported:
                return None
            if code in self.unavailable:
                raise self._error(exc, "NVML stopped answering") from None
            raise _Skipped() from None

    def _error(self, exc: Exception, what: str) -> BackendUnavailable:
        return BackendUnavailable(f"{what}: {exc} (NVML error {_code(exc)})")


class _Skipped(Exception):
    """A GPU that did not answer this time."""


def _code(exc: Exception) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None
