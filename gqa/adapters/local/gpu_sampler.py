"""The GPUs read every few seconds on a thread of the daemon's own, so a slow
or hung driver never holds the control loop: the loop only takes the latest
reading (`latest()`), which live views may show as they are.

A machine where the GPUs cannot be read (no NVML, no driver, virtual GPUs)
runs without sampling: said once in the daemon's log, then nothing."""

from __future__ import annotations

import logging
import threading

from ...models.errors import BackendUnavailable
from ...ports.observe import GpuReading, GpuReadings

log = logging.getLogger("gqa.gpus")
SAMPLE_EVERY = 15.0    # seconds between two readings


class GpuSampler:
    def __init__(self, gpus: GpuReadings, every: float = SAMPLE_EVERY):
        self.gpus, self.every = gpus, every
        self._latest: dict[int, GpuReading] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.working = False     # at least one reading came

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gqa-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def latest(self) -> dict[int, GpuReading]:
        """The last reading of each GPU that answered; {} before the first or without NVML."""
        with self._lock:
            return dict(self._latest)

    def _run(self) -> None:
        failing = ""
        try:
            while not self._stop.is_set():
                try:
                    readings = self.gpus.read()
                except BackendUnavailable as exc:
                    if not self.working:
                        log.info("GPU utilisation is not sampled on this machine: %s", exc)
                        return
                    if str(exc) != failing:
                        log.warning("GPU readings failed, retrying: %s", exc)
                        failing = str(exc)
                except Exception:   # a driver's surprise must not end the sampling for good
                    if not failing:
                        log.exception("GPU readings failed, retrying")
                        failing = "unexpected"
                else:
                    if not self.working:
                        log.info("sampling %d GPUs every %gs", len(readings), self.every)
                    elif failing:
                        log.info("GPU readings work again")
                    self.working, failing = True, ""
                    with self._lock:
                        self._latest = readings
                self._stop.wait(self.every)
        finally:
            close = getattr(self.gpus, "close", None)
            if close is not None:
                close()
