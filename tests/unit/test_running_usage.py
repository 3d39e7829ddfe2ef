"""Running jobs count as they run: the one rule both stores and the simulator use."""

import pytest

from gqa.scheduling.fairshare import with_running


def test_a_running_job_adds_its_gpus_times_elapsed_to_its_team():
    usage = with_running({"vision": 100.0}, [("vision", 2, 1000.0), ("nlp", 4, 1090.0)], now=1100.0)
    assert usage == {"vision": pytest.approx(300.0), "nlp": pytest.approx(40.0)}


def test_an_attempt_not_started_or_started_after_now_adds_nothing():
    assert with_running({}, [("vision", 2, None), ("nlp", 1, 2000.0)], now=1000.0) == {"nlp": 0.0}


def test_jobs_of_one_team_add_up():
    assert with_running({}, [("vision", 1, 0.0), ("vision", 3, 50.0)], now=100.0) == {"vision": pytest.approx(250.0)}
