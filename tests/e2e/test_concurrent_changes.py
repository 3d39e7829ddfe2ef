"""Two changes of one thing made at once from the real CLI, beside a running
daemon: `gqa quota set T --budget 101 & gqa quota set T --max-gpus 1 & wait`,
and `gqa update J --time 7h & gqa update J --gpus 0 & wait`. Each pair
starts together (two processes meeting at a barrier before each command),
many times over; every time both commands say what they did and both
changes are there."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import time

import pytest

pytestmark = pytest.mark.e2e

TRIES = 25
TEAM_FLAGS = (("--budget", "101"), ("--max-gpus", "1"))
UPDATE_FLAGS = (("--time", "7h"), ("--gpus", "0"))


def _commands(home: str, commands: list[list[str]], barrier, answers) -> None:
    """A user's shell in a process of its own: each command through gqa's own entry point, once the
    other process is ready to start its own."""
    os.environ["GQA_HOME"] = home
    from cli.main import main

    out = []
    for argv in commands:
        barrier.wait()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            code = main(argv)
        out.append((code, printed.getvalue()))
    answers.put(out)


def _at_once(home, first: list[list[str]], second: list[list[str]]) -> list[tuple[int, str]]:
    """Run the two lists of commands in two processes, pair by pair at the same moment."""
    spawn = multiprocessing.get_context("spawn")
    barrier, answers = spawn.Barrier(2, timeout=60), spawn.Queue()
    processes = [spawn.Process(target=_commands, args=(str(home), commands, barrier, answers))
                 for commands in (first, second)]
    for process in processes:
        process.start()
    out = [answer for _ in processes for answer in answers.get(timeout=120)]
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    return out


def test_two_quota_changes_of_one_team_made_at_once_both_land(queue):
    teams = [f"race{i}" for i in range(TRIES)]
    started = time.monotonic()

    answers = _at_once(queue.home, *[[["quota", "set", team, flag, value] for team in teams]
                                     for flag, value in TEAM_FLAGS])

    assert [code for code, _ in answers] == [0] * 2 * TRIES, answers
    stored = queue.backend.store.teams()
    assert [(stored[t].budget, stored[t].max_gpus) for t in teams] == [(101.0, 1)] * TRIES
    assert time.monotonic() - started < 60


def test_two_updates_of_one_job_made_at_once_both_land(queue):
    # held: the daemon leaves them pending, so each pair of updates finds its job updatable
    ids = [queue.submit(["true"], name=f"race{i}", hold=True, resources={"gpus": 2}, limits={"wall_time": "1h"})[0]
           for i in range(TRIES)]
    started = time.monotonic()

    answers = _at_once(queue.home, *[[["update", job_id, flag, value] for job_id in ids]
                                     for flag, value in UPDATE_FLAGS])

    assert [(code, " updated (" in text) for code, text in answers] == [(0, True)] * 2 * TRIES, answers
    jobs = [queue.job(job_id) for job_id in ids]
    assert [(j.state.value, j.wall_time, j.gpus) for j in jobs] == [("HELD", 7 * 3600, 0)] * TRIES
    assert [(j.spec.limits.wall_time, j.spec.resources.gpus) for j in jobs] == [(7 * 3600, 0)] * TRIES
    assert time.monotonic() - started < 60
