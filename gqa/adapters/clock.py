"""The real clock and randomness, behind the Clock and Random ports."""

import random
import time


class SystemClock:
    def now(self) -> float:
        return time.time()


class SystemRandom:
    def __init__(self) -> None:
        self._rng = random.Random()

    def random(self) -> float:
        return self._rng.random()
