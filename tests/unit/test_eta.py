"""ETA: the pass run forward over expected ends."""

import pytest

from gqa.scheduling.eta import expected_runtime, predict_starts, runtime_ratio
from gqa.scheduling.presets import preset
from tests.builders import pending, running, snapshot

NOW = snapshot().now
MF = preset("multifactor")


@pytest.mark.parametrize("samples, ratio", [
    ([], 1.0),
    ([(30, 60), (45, 60), (60, 60)], 0.75),
    ([(1, 100)], 0.05),                    # floored: a job that died at once says little
    ([(200, 100)], 1.0),                   # over the limit (killed at it) counts as 1
    ([(10, 0), (10, None)], 1.0),          # no limit: no information
])
def test_runtime_ratio(samples, ratio):
    assert runtime_ratio(samples) == ratio


def test_expected_runtime():
    assert expected_runtime(3600, 0.5) == 1800 and expected_runtime(None, 0.5) is None


def test_jobs_start_when_the_running_ones_are_expected_to_end():
    snap = snapshot(2, policy=MF, running=[running("r1", gpus=[0], started_at=NOW, wall_time=100),
                                           running("r2", gpus=[1], started_at=NOW, wall_time=300)],
                    pending=[pending("a", wall_time=50, seq=0), pending("b", wall_time=50, seq=1, submitted_at=1),
                             pending("c", gpus=2, wall_time=10, seq=2, submitted_at=2)])
    eta = predict_starts(snap)
    # a takes GPU 0 at +100 and ends +150; b takes it at +150; c needs both: after r2 (+300)
    assert eta == {"a": NOW + 100, "b": NOW + 150, "c": NOW + 300}


def test_team_history_shortens_the_expected_ends():
    snap = snapshot(1, policy=MF, running=[running("r", team="vision", gpus=[0], started_at=NOW, wall_time=1000)],
                    pending=[pending("a", wall_time=10)])
    assert predict_starts(snap, ratios={"vision": 0.25}) == {"a": NOW + 250}


def test_a_job_started_now_has_eta_now_and_unknown_ends_give_none():
    snap = snapshot(2, policy=MF, running=[running("r", gpus=[0], started_at=NOW)],
                    pending=[pending("now", seq=0), pending("later", gpus=2, seq=1, submitted_at=1)])
    assert predict_starts(snap) == {"now": NOW, "later": None}


def test_targets_limit_the_answer():
    snap = snapshot(1, policy=MF, running=[running("r", gpus=[0], started_at=NOW, wall_time=60)],
                    pending=[pending("a", wall_time=60, seq=0), pending("b", wall_time=60, seq=1, submitted_at=1)])
    assert predict_starts(snap, targets={"a"}) == {"a": NOW + 60}


def test_a_job_past_its_expected_end_is_expected_halfway_to_its_limit_never_in_the_past():
    # started 900 s ago with a 1000 s limit, expected 100 s (ratio 0.1): overdue
    snap = snapshot(1, policy=MF, running=[running("r", gpus=[0], started_at=NOW - 900, wall_time=1000)],
                    pending=[pending("a", wall_time=10)])
    assert predict_starts(snap, ratios={"default": 0.1}) == {"a": NOW + 50}
