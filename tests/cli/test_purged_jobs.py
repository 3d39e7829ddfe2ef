"""A job the history retention deleted (`gqa local start --keep-history`): the commands that name it
say it is gone, past the retention, not that it waits for admission (AWS's case), and fail."""

import time

import pytest

DAY = 86_400.0
GONE = "job 1 ended more than 1 day ago and its record is gone"


@pytest.fixture
def purged(cli):
    code, out, err = cli("submit", "--gpus", "0", "--", "true")
    assert code == 0, err
    code, _, err = cli("cancel", "1")
    assert code == 0, err
    assert cli.store.prune_history(time.time() + 1, 500, keep=DAY) == 1
    return cli


@pytest.mark.parametrize("command", [("status", "1"), ("logs", "1"), ("wait", "1")])
def test_a_purged_job_is_named_gone_and_the_command_fails(purged, command):
    code, _, err = purged(*command)
    assert code != 0
    assert GONE in err and "admission" not in err


def test_a_dependency_on_a_purged_job_is_refused(purged):
    code, _, err = purged("submit", "--gpus", "0", "--after", "1", "--", "true")
    assert code == 2 and f"dependency afterok:1: {GONE}" in err
    assert purged.job_count() == 0
