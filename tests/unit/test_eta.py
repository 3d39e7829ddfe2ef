"""ETA: the pass run forward over expected ends."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gqa.scheduling.eta import expected_runtime, predict_starts, runtime_ratio
from gqa.scheduling.presets import NAMES, preset
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


def test_two_teams_bursts_are_predicted_to_start_interleaved_by_fair_share():
    # 2 GPUs, each team submits a burst of 4 one-minute jobs, vision's first: fair share alternates the
    # starts (a team holding a GPU ranks below one holding none), and the answer is in start order
    burst = [pending(f"v{i}", team="vision", wall_time=60, seq=i, submitted_at=0) for i in range(4)]
    burst += [pending(f"n{i}", team="nlp", wall_time=60, seq=10 + i, submitted_at=1) for i in range(4)]
    eta = predict_starts(snapshot(2, policy=MF, pending=burst))
    assert list(eta) == ["v0", "n0", "v1", "n1", "v2", "n2", "v3", "n3"]
    assert [eta[j] - NOW for j in eta] == [0, 0, 60, 60, 120, 120, 180, 180]


def test_most_stops_the_replay_and_leaves_the_rest_untold():
    jobs = [pending(f"j{i}", wall_time=60, seq=i) for i in range(5)]
    eta = predict_starts(snapshot(1, policy=MF, pending=jobs), most=2)
    assert list(eta)[:2] == ["j0", "j1"] and [eta[f"j{i}"] for i in range(2, 5)] == [None] * 3


@st.composite
def long_queues(draw):
    """Up to 40 pending jobs of a few shapes (so buckets hold many), with wall times so that the
    replay runs many passes, on 2 to 6 GPUs with running jobs, caps, array limits and --begin."""
    gpu_count = draw(st.integers(2, 6))
    held = draw(st.integers(0, gpu_count))
    runs = [running(f"r{i}", team=draw(st.sampled_from(("vision", "nlp"))), gpus=[i], started_at=NOW,
                    wall_time=draw(st.sampled_from((30, 90, None)))) for i in range(held)]
    jobs = []
    for i in range(draw(st.integers(0, 40))):
        group = draw(st.sampled_from([None, "g1", "g2"]))
        jobs.append(pending(
            f"p{i}", team=draw(st.sampled_from(("vision", "nlp"))), user=draw(st.sampled_from(("ann", "bob"))),
            tier=draw(st.sampled_from((1, 1, 1, 0))), gpus=draw(st.sampled_from((1, 1, 2, 0))), seq=i,
            submitted_at=float(draw(st.integers(0, 3))), wall_time=draw(st.sampled_from((60, 600))),
            exclusive=draw(st.integers(0, 19)) == 0, held=draw(st.integers(0, 9)) == 0,
            begin=draw(st.sampled_from([None] * 8 + [NOW + 100])),
            group=group, group_limit=draw(st.none() | st.integers(1, 2)) if group else None,
            cpus=draw(st.sampled_from((None, None, None, 2)))))
    teams = {t: {"max_gpus": draw(st.none() | st.integers(1, 4)),
                 "max_gpus_per_user": draw(st.none() | st.integers(1, 3))} for t in ("vision", "nlp")}
    policy = replace(preset(draw(st.sampled_from(NAMES))), reservation_depth=draw(st.integers(0, 2)),
                     backfill=draw(st.booleans()))
    return snapshot(gpu_count, policy=policy, pending=jobs, running=runs, teams=teams,
                    cpus=draw(st.none() | st.integers(2, 8)))


@settings(max_examples=100, deadline=None)
@given(long_queues())
def test_the_window_predicts_what_the_whole_queue_would(snap):
    # each replayed pass sees a window of the queue; the same starts, at the same times, in the same order
    whole, windowed = predict_starts(snap, window=False), predict_starts(snap)
    assert windowed == whole
    assert [j for j, at in windowed.items() if at is not None] == [j for j, at in whole.items() if at is not None]
