"""The replay's report as people read it: the ETA's line carries the goal's measure."""

import pytest

from gqa.sim.report import eta_line

CHECKED = {"eta_median_abs_error": 0.0, "eta_p90_abs_error": 30.0}


@pytest.mark.parametrize("summary, line", [
    ({**CHECKED, "eta_checked": 1, "eta_waited_checked": 0}, "median 0s, p90 30s over 1 job; it did not wait"),
    ({**CHECKED, "eta_checked": 2, "eta_waited_checked": 0}, "median 0s, p90 30s over 2 jobs; none of them waited"),
    ({**CHECKED, "eta_checked": 1200, "eta_waited_checked": 1100, "eta_waited_mean_abs_error": 1800.0,
      "eta_error_of_wait": 0.5, "eta_waited_mean_wait": 3600.0, "eta_waited_median_abs_error": 600.0,
      "eta_waited_p90_abs_error": 5400.0},
     "median 0s, p90 30s over 1,200 jobs; over the 1,100 that waited: mean 30m00s (0.50 of their mean wait, "
     "1h00m), median 10m00s, p90 1h30m"),
])
def test_the_eta_line_words_counts_and_gives_the_mean_error_over_the_mean_wait(summary, line):
    assert eta_line(summary) == line
