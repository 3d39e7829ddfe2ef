"""Which cores an attempt that asks for N CPUs is pinned to: N cores no
other running attempt is pinned to, so two jobs of 4 CPUs on a 16-core box
never share one (`nproc` and thread pools inside the job see N). Children
inherit the affinity of the wrapper, which is pinned before its gate opens.
When too few cores are free the attempt still starts, on the least used
ones, and the reason says so."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable


def usable_cores() -> frozenset[int]:
    """The cores this daemon may run on (its own affinity: a taskset or cgroup may narrow it)."""
    return frozenset(os.sched_getaffinity(0))


def choose_cores(wanted: int, usable: Iterable[int], taken: Iterable[Iterable[int]]) -> tuple[frozenset[int], str]:
    """`wanted` cores out of `usable`, the free ones first (`taken`: the cores
    of each other pinned attempt), then the least used. Returns the cores and,
    when they are not all free, why, with the numbers."""
    cores = sorted(usable)
    use = Counter(core for pinned in taken for core in pinned if core in cores)
    free = [c for c in cores if not use[c]]
    if len(free) >= wanted:
        return frozenset(free[:wanted]), ""
    chosen = sorted(cores, key=lambda c: (use[c], c))[:wanted]
    why = (f"asks for {wanted} CPUs; {len(free)} of the {len(cores)} cores are free of other jobs: "
           f"pinned to the least used, {core_list(chosen)}")
    if wanted > len(cores):
        why = f"asks for {wanted} CPUs; this machine lets gqa use {len(cores)}: pinned to all of them"
    return frozenset(chosen), why


def pin(pid: int, cores: frozenset[int]) -> None:
    try:
        os.sched_setaffinity(pid, cores)
    except ProcessLookupError:   # it died at its gate: its end reports it
        pass


def pinned_cores(pid: int, usable: frozenset[int]) -> frozenset[int]:
    """The cores a running process is pinned to (after a daemon restart); none when it may use them all."""
    try:
        cores = frozenset(os.sched_getaffinity(pid))
    except OSError:
        return frozenset()
    return frozenset() if cores >= usable else cores


def core_list(cores: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (as taskset and cpuset write it)."""
    runs: list[list[int]] = []
    for core in sorted(cores):
        if runs and core == runs[-1][1] + 1:
            runs[-1][1] = core
        else:
            runs.append([core, core])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)
