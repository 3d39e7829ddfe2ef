"""What the daemon watches besides its jobs' processes, each a step of the loop
due every so often:

- the GPUs' readings (taken on the sampler's own thread) folded into each
  running job's utilisation and peak memory, written on its record at most
  once a minute and once more as its attempt ends;
- the budget watch, as the budget function runs it on AWS: budget
  thresholds, idle GPUs (from those readings), jobs waiting too long, and
  the budget's holds; its alerts go to the daemon's log unless a notifier
  is set up. The thresholds are the queue's policy (`gqa quota policy`).

A step that fails is logged once per kind and tried again when next due;
nothing here holds the loop longer than its store reads."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gqa.models.job import JobState

if TYPE_CHECKING:
    from gqa.adapters.local.gpu_sampler import GpuSampler
    from gqa.ports import Exit, Notifier
    from gqa.services.budget_watch import BudgetWatch
    from gqa.services.gpu_usage import GpuUsage

    from .wiring import DaemonWiring

log = logging.getLogger("gqa.daemon")
WATCH_EVERY = 60.0     # seconds between two budget watch ticks, as on AWS at most


@dataclass
class Step:
    name: str
    every: float
    due: float = 0.0           # time.monotonic()
    failing: str = ""

    def ran(self, now: float, exc: BaseException | None = None) -> None:
        self.due = now + self.every
        if exc is None:
            if self.failing:
                log.info("%s works again", self.name)
            self.failing = ""
            return
        message = f"{type(exc).__name__}: {exc}"
        if message != self.failing:
            log.warning("%s failed, trying again in %gs: %s", self.name, self.every, exc)
            self.failing = message


@dataclass
class Observers:
    wiring: DaemonWiring
    watch: BudgetWatch | None
    sampler: GpuSampler | None = None
    usage: GpuUsage | None = None
    steps: dict[str, Step] = field(default_factory=dict)

    def run_due(self) -> None:
        now = time.monotonic()
        sampling = self.steps.get("sampling")
        if sampling is not None and now >= sampling.due:
            try:
                self._fold()
                sampling.ran(now)
            except Exception as exc:
                sampling.ran(now, exc)
        watching = self.steps.get("watch")
        if watching is not None and self.watch is not None and now >= watching.due:
            try:
                self.watch.tick()
                watching.ran(now)
            except Exception as exc:
                watching.ran(now, exc)

    def _fold(self, ended: Iterable[str] = ()) -> None:
        if self.sampler is None or self.usage is None or not self.sampler.working:
            return    # nothing read yet (or never: no NVML here): no store read either
        self.usage.observe(self.sampler.latest(), self.wiring.store.list([JobState.RUNNING]))
        self.usage.write(ended)

    def ending(self, exits: list[Exit]) -> None:
        """Before the attempts in `exits` are settled: their last figures on their records."""
        if self.usage is None or not exits:
            return
        try:
            self._fold(e.job_id for e in exits)
        except Exception as exc:   # the figures are a nicety: the settlement must go on
            log.warning("could not record GPU figures of ended jobs: %s", exc)

    def next_due(self) -> float | None:
        """Seconds until the next step is due."""
        dues = [s.due for s in self.steps.values()]
        return max(0.0, min(dues) - time.monotonic()) if dues else None

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        close = getattr(self.watch.records, "close", None) if self.watch is not None else None
        if close is not None:
            close()


def observers_for(wiring: DaemonWiring, notifier: Notifier | None = None) -> Observers:
    """The GPUs sampled where NVML loads (or the tests' simulated ones), and the budget watch."""
    from gqa.adapters.local.budget_records import SqliteBudgetRecords
    from gqa.adapters.local.gpu_sampler import SAMPLE_EVERY, GpuSampler
    from gqa.adapters.local.log_notifier import LogNotifier
    from gqa.adapters.local.nvml import NvmlGpus, load_nvml
    from gqa.adapters.local.wake import SocketWaker
    from gqa.models.errors import BackendUnavailable
    from gqa.services.budget_watch import BudgetWatch
    from gqa.services.gpu_usage import WRITE_EVERY, GpuUsage

    from .simulated_gpus import settings_from_env, simulated_nvml

    test = settings_from_env() or {}
    sample_every = float(test.get("sample_every", SAMPLE_EVERY))
    watch_every = float(test.get("watch_every", WATCH_EVERY))
    nvml: object = simulated_nvml()
    if nvml is None:
        try:
            nvml = load_nvml()
        except BackendUnavailable as exc:
            log.info("GPU utilisation is not sampled on this machine: %s", exc)
    sampler = usage = None
    indexes = [g.index for g in wiring.inventory.gpus]
    if nvml is not None and indexes:
        sampler = GpuSampler(NvmlGpus(nvml, indexes), sample_every)
        usage = GpuUsage(wiring.store, wiring.clock, sample_every=sample_every,
                         write_every=float(test.get("write_every", WRITE_EVERY)))
        sampler.start()
    # the watch's releases ring the daemon's own doorbell: its next turn starts them, not a turn up to 30 s
    # later (loop.IDLE_CHECK)
    watch = BudgetWatch(wiring.store, SqliteBudgetRecords(wiring.paths.db), notifier or LogNotifier(), wiring.clock,
                        utilisation=usage, waker=SocketWaker(wiring.paths))
    steps = {"watch": Step("the budget watch", watch_every, due=time.monotonic() + watch_every)}
    if sampler is not None:
        steps["sampling"] = Step("recording GPU figures", sample_every, due=time.monotonic() + sample_every)
    return Observers(wiring, watch, sampler, usage, steps)
