"""The records a dispatcher plans from are kept between its passes (services/snapshot.Estimated):
a job's is made again only when the store hands back a different record for it or its team's
run-time ratio moved, and a record kept is equal to the one a fresh read makes."""

from dataclasses import replace

import pytest

from gqa.scheduling.eta import expected_runtime
from gqa.services.snapshot import Estimated
from tests.builders import pending, running

NOW = 50_000.0


def test_a_kept_record_is_the_same_while_its_job_and_ratio_stand():
    jobs = [pending("1", team="a", wall_time=3600.0), pending("2", team="b", wall_time=7200.0)]
    kept = Estimated(kept=True)
    first = kept.pending(jobs, {"a": 0.5})
    again = kept.pending(jobs, {"a": 0.5})
    assert [j.expected_runtime for j in first] == [1800.0, 7200.0]
    assert all(a is b for a, b in zip(first, again))
    assert first == Estimated().pending(jobs, {"a": 0.5})   # what a one-off read makes


@pytest.mark.parametrize("change, remade", [
    ("the team's ratio", {"1"}),
    ("another record of the job", {"2"}),
    ("the job left and came back", {"2"}),
    ("an equal record, read afresh", set()),   # a store that reads its rows again (SQLite)
])
def test_a_record_is_made_again_when_what_it_is_made_of_changes(change, remade):
    jobs = [pending("1", team="a", wall_time=3600.0), pending("2", team="b", wall_time=3600.0)]
    kept = Estimated(kept=True)
    before = {j.id: j for j in kept.pending(jobs, {"a": 0.5})}
    ratios = {"a": 0.5}
    if change == "the team's ratio":
        ratios = {"a": 0.25}
    elif change == "another record of the job":
        jobs = [jobs[0], replace(jobs[1], held=True)]
    elif change == "an equal record, read afresh":
        jobs = [replace(job) for job in jobs]
    else:
        kept.pending(jobs[:1], ratios)
    after = {j.id: j for j in kept.pending(jobs, ratios)}
    assert {i for i in after if after[i] is not before[i]} == remade
    assert list(after.values()) == Estimated().pending(jobs, ratios)


def test_an_attempt_not_started_yet_begins_now_at_every_pass():
    runs = [running("1", started_at=100.0, wall_time=3600.0, started=True),
            running("2", started_at=100.0, wall_time=3600.0, started=False)]
    kept = Estimated(kept=True)
    first = kept.running(runs, {}, NOW)
    later = kept.running(runs, {}, NOW + 60)
    assert [r.started_at for r in first] == [100.0, NOW]
    assert [r.started_at for r in later] == [100.0, NOW + 60]
    assert later[0] is first[0]
    assert all(r.expected_runtime == expected_runtime(3600.0, 1.0) for r in first + later)


def test_a_one_off_read_keeps_nothing():
    jobs = [pending("1", wall_time=3600.0)]
    once = Estimated()
    assert once.pending(jobs, {})[0] is not once.pending(jobs, {})[0]


@pytest.mark.parametrize("before, now, settled", [
    ({"a": 0.5}, {"a": 0.52}, {"a": 0.5}),           # 4% off: kept, nothing re-estimated
    ({"a": 0.5}, {"a": 0.549}, {"a": 0.5}),          # just under 10% off: kept
    ({"a": 0.5}, {"a": 0.56}, {"a": 0.56}),          # 12% off: taken
    ({"a": 0.5}, {"a": 0.44}, {"a": 0.44}),          # 12% off, down: taken
    ({"a": 0.5}, {"a": 0.5, "b": 0.9}, {"a": 0.5, "b": 0.9}),   # a team's first ratio: taken as it comes
    ({"a": 0.5, "b": 0.9}, {"a": 0.51}, {"a": 0.5}),             # a team whose samples aged out: dropped
    # below the rank floor (0.05) every ratio estimates alike: kept however far it moves there
    ({"a": 0.001}, {"a": 0.04}, {"a": 0.001}),
    ({"a": 0.04}, {"a": 0.0001}, {"a": 0.04}),
    ({"a": 0.01}, {"a": 0.054}, {"a": 0.01}),        # 0.054 is under 10% past the floor: as good as it
    ({"a": 0.01}, {"a": 0.056}, {"a": 0.056}),       # 12% past the floor: taken
    ({"a": 0.06}, {"a": 0.001}, {"a": 0.001}),       # from 0.06 to the floor is 17%: taken
])
def test_a_kept_caller_goes_on_with_a_teams_ratio_until_it_moves_by_more_than_the_drift(before, now, settled):
    kept = Estimated(kept=True)
    assert kept.settled(before) == before
    assert kept.settled(now) == settled
    assert Estimated().settled(now) == now   # a one-off read takes them as they are


@pytest.mark.parametrize("was, now, band, settled", [
    (0.3, 0.4, (0.3, 0.4), 0.3),      # 33% off, but the samples cannot tell 0.3 from their median: kept
    (0.4, 0.3, (0.3, 0.4), 0.4),      # and back
    (0.3, 0.4, (0.35, 0.45), 0.4),    # out of the band and past the drift: taken
    (0.3, 0.4, None, 0.4),            # too few samples for a band: the drift alone
    (0.01, 0.2, (0.001, 0.03), 0.01),   # a band reaching below the floor keeps a ratio there
    (0.01, 0.2, (0.06, 0.3), 0.2),
])
def test_a_kept_caller_goes_on_with_a_ratio_within_the_band_of_its_samples_median(was, now, band, settled):
    kept = Estimated(kept=True)
    kept.settled({"a": was})
    bands = {"a": band} if band else {}
    assert kept.in_use({"a": now}, bands) == {"a": settled}
    assert kept.settled({"a": now}, bands) == {"a": settled}
    assert Estimated().settled({"a": now}, bands) == {"a": now}   # a one-off read takes them as they are


def test_a_ratio_drifting_by_small_steps_is_taken_once_it_is_the_drift_away_from_the_one_in_use():
    kept = Estimated(kept=True)
    used = [kept.settled({"a": 0.5 + step * 0.02})["a"] for step in range(8)]
    assert used == [0.5, 0.5, 0.5, 0.56, 0.56, 0.56, 0.62, 0.62]


def test_the_ratios_in_use_are_what_the_next_settling_hands_back_and_keep_nothing():
    kept = Estimated(kept=True)
    kept.settled({"a": 0.5})
    assert kept.in_use({"a": 0.51, "b": 0.9}) == {"a": 0.5, "b": 0.9}
    assert kept.in_use({"a": 0.6}) == {"a": 0.6}
    assert kept.settled({"a": 0.51}) == {"a": 0.5}   # the look at 0.6 moved nothing
