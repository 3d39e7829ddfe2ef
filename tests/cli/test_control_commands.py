"""`gqa hold`, `gqa release` and `gqa update` on the local queue: what they
print (`job 1 held`, one line per big array), `-o json`, and bad input as
one line on stderr with exit code 2 and nothing written."""

import json

import pytest

from cli.hold import SUMMARISED_OVER
from gqa.scheduling.snapshot import Policy


def test_hold_then_release_a_job(cli):
    cli.json("submit", "--", "true")

    assert cli("hold", "1") == (0, "job 1 held\n", "")
    assert cli("hold", "1") == (0, "job 1 unchanged (already held)\n", "")
    assert cli.json("status", "1")["state"] == "HELD"
    assert cli("release", "1") == (0, "job 1 released\n", "")
    assert cli.json("status", "1")["state"] == "QUEUED"


def test_a_big_array_prints_one_line_and_json_lists_every_task(cli):
    cli.json("submit", "--array", f"0-{SUMMARISED_OVER}", "--", "true")

    code, out, _ = cli("hold", "1")

    assert (code, out) == (0, f"array 1: {SUMMARISED_OVER + 1} held\n")
    released = cli.json("release", "1")
    assert len(released) == SUMMARISED_OVER + 1 and {r["action"] for r in released} == {"released"}
    assert {r["state"] for r in released} == {"QUEUED"}


def test_update_says_what_changed(cli):
    cli.json("submit", "--gpus", "2", "--time", "4h", "--", "true")

    code, out, err = cli("update", "1", "--time", "90m", "-p", "high", "--gpus", "1")

    assert (code, err) == (0, "")
    assert out == "job 1 updated (wall time 4h00m -> 1h30m, priority normal -> high, GPUs 2 -> 1)\n"
    status = cli.json("status", "1")
    assert (status["priority"], status["gpus"], cli.store.get("1").wall_time) == ("high", 1, 5400)
    [again] = cli.json("update", "1", "--gpus", "1")
    assert (again["action"], again["detail"]) == ("unchanged", "already has 1 GPUs")


@pytest.mark.parametrize("args, message", [
    (("update", "1"), "nothing to update: give --time, --priority or --gpus"),
    (("update", "1", "--time", "soon"), "invalid duration"),
    (("update", "1", "--priority", "urgent"), "unknown priority 'urgent'; use high, normal or low"),
    (("update", "1", "--gpus", "9"), "job 1 cannot be updated: it asks for 9 GPUs; the queue has 4"),
    (("update", "1", "--time", "3d"), "asks for 3d00h wall time; the limit is 1d00h"),
    (("update", "7", "--gpus", "1"), "no job or array 7"),
    (("hold", "7"), "no job or array 7"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_changes(cli, args, message):
    cli.json("submit", "--gpus", "2", "--time", "4h", "--", "true")
    cli.store.set_policy(Policy(max_wall_time=86400))
    before = cli.store.get("1")

    code, out, err = cli(*args)

    assert (code, out) == (2, "")
    assert err.startswith("gqa: error: ") and message in err and err.count("\n") == 1
    assert cli.store.get("1") == before


@pytest.mark.parametrize("command", ["hold", "release"])
def test_holding_or_releasing_an_ended_job_named_alone_is_exit_2_alike(cli, command):
    cli.json("submit", "--array", "0-1", "--", "true")
    cli("cancel", "1_0")
    code, out, err = cli(command, "1_0")
    assert (code, out) == (2, "") and err.startswith("gqa: error: job 1_0 already cancelled; only a")
    code, out, _ = cli(command, "1")                      # the array: its ended task left as it is
    assert code == 0 and "1_1" in out


def test_holding_a_running_job_says_to_cancel_or_requeue_it(cli):
    from gqa.models.job import JobState
    from gqa.ports import Change

    cli.json("submit", "--", "true")
    cli.store.apply([Change("1", JobState.QUEUED, JobState.STARTING, "test", 1.0, {"assigned": (0,)})])
    code, out, err = cli("hold", "1")
    assert (code, out) == (2, "")
    assert err == ("gqa: error: job 1 is starting; only a pending job can be held "
                   "(gqa cancel 1 stops it, gqa requeue 1 sends it back to the queue)\n")


@pytest.mark.parametrize("command, action", [("cancel", "cancelling 1 (stopping its processes)"),
                                             ("requeue", "requeueing 1 (SIGTERM asked for; it keeps its place")])
def test_stopping_a_running_job_while_the_daemon_is_down_says_when_it_happens(cli, command, action):
    """Nothing signals the job until a daemon runs: the command says so, not only "stopping"."""
    from gqa.models.job import JobState
    from gqa.ports import Change

    cli.json("submit", "--", "true")
    cli.store.apply([Change("1", JobState.QUEUED, JobState.STARTING, "test", 1.0, {"assigned": (0,)})])
    cli.store.apply([Change("1", JobState.STARTING, JobState.RUNNING, "started", 1.0, {"attempts": 1})])
    code, out, err = cli(command, "1")
    assert code == 0 and out.startswith(action)
    assert err == ("note: the queue daemon is not running; running jobs are signalled when `gqa local start` "
                   "runs (until then they keep running)\n")
    if command == "cancel":        # asked again: still not signalled; the JSON alone on stdout
        code, out, err = cli(command, "1", "-o", "json")
        assert code == 0 and json.loads(out)[0]["detail"] == "already being cancelled"
        assert err.startswith("note: the queue daemon is not running")


def test_status_of_a_pending_job_while_the_daemon_is_down_says_nothing_starts_until_it_runs(cli):
    cli.json("submit", "--", "true")
    code, out, err = cli("status", "1")
    assert code == 0 and "starting now" not in out and "would start now: the queue's daemon is not running" in out
    assert err == "note: the queue daemon is not running; pending jobs start once `gqa local start` runs\n"
    code, out, err = cli("status", "1", "-o", "json")        # the JSON alone on stdout
    assert code == 0 and json.loads(out)["id"] == "1" and err.startswith("note: the queue daemon")
