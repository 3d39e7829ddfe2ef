"""What status, queue, history, cost, top, quota and ui say in words: a
signal by its name, money to the cent halves up, totals that say what they
count, and an id that names nothing refused."""

import time

import pytest

from gqa.models.job import JobState
from gqa.ports import Change
from tests.contract.jobs import new_job
from tests.services.conftest import Queue

S = JobState


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")     # every column shown, each row on one line


def ended(store, *, cost: float = 0.0, ran: float = 60.0, ago: float = 600.0, **record):
    """A job that ran `ran` seconds and ended `ago` seconds back, having cost `cost`."""
    end = time.time() - ago
    start = end - ran
    [job] = store.create([new_job(submitted_at=start - 1, **record)])
    store.apply([Change(job.id, S.QUEUED, S.STARTING, "claimed", start)])
    store.apply([Change(job.id, S.STARTING, S.RUNNING, "started", start, {"started_at": start})])
    [job] = store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", end,
                                {"ended_at": end, "gpu_seconds": ran * job.gpus, "cost": cost, "exit_code": 0})])
    return job


def test_status_names_the_signal_that_ended_a_job_as_history_does(cli):
    queue = Queue(cli.store, 4)
    job = queue.start()
    queue.exit(job.id, None, 15)
    code, out, err = cli("status", job.id)
    assert code == 0, err
    [line] = [line for line in out.splitlines() if line.strip().startswith("exit")]
    assert line == "  exit       signal 15 (SIGTERM)"
    failed = queue.start()
    queue.exit(failed.id, 3)
    code, out, err = cli("status", failed.id)
    assert "  exit       code 3" in out.splitlines()


def test_a_budget_shows_to_the_cent_halves_up_in_cost_top_quota_and_ui(cli):
    from cli.backend import backend
    from cli.ui_view import page_data, read

    assert cli("quota", "set", "nlp", "--budget", "0.745")[0] == 0
    for command in (["cost"], ["top", "--once"], ["quota", "show"]):
        code, out, err = cli(*command)
        assert code == 0, err
        [row] = [line for line in out.splitlines() if line.startswith("nlp")]
        assert "$0.75" in row and "$0.74" not in row, (command, row)
    [team] = [t for t in page_data(read(backend()), source="here")["teams"] if t["team"] == "nlp"]
    assert team["budget"] == 0.75


def test_history_and_status_show_money_to_the_cent_halves_up(cli):
    job = ended(cli.store, cost=0.125)            # $0.125 is held exactly: a float's format gives $0.12
    code, out, err = cli("history")
    assert code == 0, err
    header, row, total = out.splitlines()
    assert row.split()[0] == job.id and "$0.13" in row.split()
    assert total.endswith(": 0.02 GPU-hours, $0.13")
    code, out, err = cli("status", job.id)
    assert "  used       0.017 GPU-hours, $0.13" in out.splitlines()


def test_the_history_summary_says_when_its_totals_are_of_the_rows_shown_only(cli):
    for n in range(5):
        ended(cli.store, cost=1.0, ran=3600.0, ago=600.0 + n)
    code, out, err = cli("history", "-n", "3")
    assert code == 0, err
    last = out.splitlines()[-1]
    assert last.startswith("3 finished, 0 running among the newest 3 of more, from ")
    assert last.endswith(": 3.00 GPU-hours, $3.00 for these 3 (`gqa cost` totals the window)")
    code, out, err = cli("history", "-n", "0")
    assert out.splitlines()[-1].startswith("5 finished, 0 running, from ")
    assert out.splitlines()[-1].endswith(": 5.00 GPU-hours, $5.00")


def test_queue_refuses_an_id_that_names_no_job_as_status_does(cli):
    assert cli("status", "99999")[0] == 2
    status_error = cli("status", "99999")[2]
    assert cli("queue", "99999") == (2, "", status_error)
    assert status_error == "gqa: error: no job or array 99999\n"
    done = ended(cli.store)                       # a finished job is out of the queue, no mistake
    code, out, err = cli("queue", done.id)
    assert code == 0 and err == "" and "pending (0)" in out


@pytest.mark.parametrize("array, message", [
    ("abc", "--array takes an array's (or sweep's) id, a number such as 12; 'abc' is none"),
    ("12_3", "--array takes an array's id, and 12_3 is one of its tasks: --array 12, or `gqa status 12_3` "
             "for the task"),
])
def test_history_refuses_an_array_id_that_is_none(cli, array, message):
    assert cli("history", "--array", array) == (2, "", f"gqa: error: {message}\n")
