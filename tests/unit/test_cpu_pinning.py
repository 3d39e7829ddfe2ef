"""Which cores an attempt that asks for CPUs is pinned to (cpu_pinning.py)."""

import pytest

from gqa.adapters.local.cpu_pinning import choose_cores, core_list


@pytest.mark.parametrize("wanted, usable, taken, cores, why", [
    (4, range(16), [], {0, 1, 2, 3}, ""),
    (4, range(16), [{0, 1, 2, 3}], {4, 5, 6, 7}, ""),                       # never a core another holds
    (2, range(8), [{0, 2}, {4, 6}], {1, 3}, ""),
    (4, [2, 3, 8, 9, 10], [], {2, 3, 8, 9}, ""),                            # only the daemon's own cores
    (3, range(4), [{0, 1}, {2}], {3, 0, 1},
     "asks for 3 CPUs; 1 of the 4 cores are free of other jobs: pinned to the least used, 0-1,3"),
    (6, range(4), [], {0, 1, 2, 3}, "asks for 6 CPUs; this machine lets gqa use 4: pinned to all of them"),
])
def test_free_cores_first_then_the_least_used(wanted, usable, taken, cores, why):
    chosen, reason = choose_cores(wanted, usable, taken)
    assert chosen == frozenset(cores) and reason == why


@pytest.mark.parametrize("cores, text", [([0, 1, 2, 5], "0-2,5"), ([3], "3"), ([7, 6, 9, 10, 11], "6-7,9-11")])
def test_core_lists_read_as_taskset_writes_them(cores, text):
    assert core_list(cores) == text
