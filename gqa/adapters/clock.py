"""The real clock and randomness, behind the Clock and Random ports, and
the watch that notices the wall clock being set."""

import random
import time
from collections.abc import Callable


class SystemClock:
    def now(self) -> float:
        return time.time()


class SystemRandom:
    def __init__(self) -> None:
        self._rng = random.Random()

    def random(self) -> float:
        return self._rng.random()


def boot_clock() -> float:
    """Seconds since boot, suspend included (the clock /proc/<pid>/stat's start times count on)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class StepWatch:
    """Tells when the wall clock was set. NTP's slewing moves the wall and the
    boot clock alike; only a step (settimeofday, NTP's step, `date -s`, a
    leap second) changes the distance between them."""

    TOLERANCE = 1.0   # seconds: a leap second is not worth a rewrite of the queue's records

    def __init__(self, wall: Callable[[], float] = time.time, boot: Callable[[], float] = boot_clock):
        self._wall, self._boot = wall, boot
        self._offset = self._read()

    def stepped(self) -> float:
        """How far the wall clock was set since the last step followed (signed
        seconds, forward positive), else 0: asked again until followed()."""
        step = self._read() - self._offset
        return step if abs(step) > self.TOLERANCE else 0.0

    def followed(self, step: float) -> None:
        """The queue's records moved by `step`: it is not a step any more."""
        self._offset += step

    def _read(self) -> float:
        return self._wall() - self._boot()
