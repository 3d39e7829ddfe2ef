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
