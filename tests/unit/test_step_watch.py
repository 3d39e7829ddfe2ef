"""StepWatch: only the wall clock being set is a step; time passing and NTP's
slewing (both clocks alike) are not, nor a leap second."""

import pytest

from gqa.adapters.clock import StepWatch


class Clocks:
    def __init__(self):
        self.wall, self.boot = 1_800_000_000.0, 5_000.0

    def passing(self, seconds):
        self.wall += seconds
        self.boot += seconds


@pytest.mark.parametrize("moves, step", [
    ([("pass", 3600.0)], 0.0),
    ([("set", 10_800.0)], 10_800.0),
    ([("set", -10_800.0)], -10_800.0),
    ([("set", 1.0)], 0.0),                      # a leap second
    ([("set", 1.5)], 1.5),
    ([("pass", 60.0), ("set", 7.0), ("pass", 60.0)], 7.0),
    ([("set", 600.0), ("set", -600.0)], 0.0),   # set and set back before anyone looked
])
def test_a_step_is_the_wall_clock_moving_against_the_boot_clock(moves, step):
    clocks = Clocks()
    watch = StepWatch(lambda: clocks.wall, lambda: clocks.boot)
    for kind, seconds in moves:
        if kind == "pass":
            clocks.passing(seconds)
        else:
            clocks.wall += seconds
    assert watch.stepped() == pytest.approx(step)


def test_a_step_is_told_until_it_is_followed_and_then_no_more():
    clocks = Clocks()
    watch = StepWatch(lambda: clocks.wall, lambda: clocks.boot)
    clocks.wall += 300.0
    assert watch.stepped() == watch.stepped() == 300.0   # following it failed: asked again
    watch.followed(300.0)
    clocks.passing(5.0)
    assert watch.stepped() == 0.0
    clocks.wall -= 50.0
    assert watch.stepped() == -50.0
