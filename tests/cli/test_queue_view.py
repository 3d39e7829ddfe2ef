"""`gqa queue` and `gqa status` as a person reads them: an array's pending tasks
alike as one row, filters, time columns, 80 columns, and one job's standing
told the same by both commands."""

import json
import re

import pytest

from gqa.models.loader import validate


def submit_as(cli, owner: str, team: str = "default", **spec) -> list[str]:
    from cli.backend import LocalBackend

    raw = {"command": ["true"], "workdir": str(cli.home), "team": team, "owner": owner} | spec
    return [j.id for j in LocalBackend(cli.home).submitter().submit(validate(raw), owner=owner)]


def pending_rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("pending")) + 2
    return [line.split() for line in lines[start:] if re.match(r"\s*(\d+|-)\s", line)]


def test_an_arrays_pending_tasks_alike_are_one_row_and_every_task_with_array(cli):
    cli("submit", "--array", "0-9", "--gpus", "4", "--time", "1h", "--", "true")
    cli("cancel", "1_4", "1_7")
    _, out, _ = cli("queue")
    rows = pending_rows(out)
    assert [r[1] for r in rows] == ["1_0", "1_[1-3,5-6,8-9]"]
    assert rows[1][0] == "2"       # where the first of them stands
    assert "pending (8), 2 rows" in out
    _, expanded, _ = cli("queue", "--array")
    assert [r[1] for r in pending_rows(expanded)] == [f"1_{i}" for i in (0, 1, 2, 3, 5, 6, 8, 9)]
    assert [p["id"] for p in cli.json("queue")["pending"]] == [f"1_{i}" for i in (0, 1, 2, 3, 5, 6, 8, 9)]


def test_tasks_waiting_for_different_reasons_are_rows_of_their_own(cli):
    cli("submit", "--array", "0-3", "--gpus", "2", "--", "true")
    cli("hold", "1_3")
    _, out, _ = cli("queue")
    assert [r[1] for r in pending_rows(out)] == ["1_[0-1]", "1_2", "1_3"]


def test_tasks_updated_apart_or_held_are_rows_of_what_they_show(cli, monkeypatch):
    """A row shows one task's limit, GPUs and priority for all its tasks: tasks updated apart are
    rows apart; tasks held by their owner are one row, which names the array to release."""
    monkeypatch.setenv("COLUMNS", "200")
    cli("submit", "--array", "0-5", "--gpus", "2", "--time", "3h", "--", "true")
    cli("update", "1_4", "--time", "1h")
    cli("update", "1_5", "--priority", "high")
    cli("submit", "--hold", "--array", "0-5", "--", "true")
    _, out, _ = cli("queue")
    rows = {r[1]: r for r in pending_rows(out)}
    assert {i: (r[5], r[6], r[7]) for i, r in rows.items() if i.startswith("1_")} == {
        "1_5": ("high", "2", "3h00m"), "1_[0-3]": ("normal", "2", "3h00m"), "1_4": ("normal", "2", "1h00m")}
    held = [line for line in out.splitlines() if "2_[0-5]" in line]
    assert len(held) == 1 and held[0].endswith("held by its owner: gqa release 2")
    _, expanded, _ = cli("queue", "--array")
    assert "held by its owner: gqa release 2_3" in expanded


def test_wide_characters_take_two_cells_and_lines_stay_within_the_terminal(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    cli("submit", "--gpus", "4", "--name", "训练任务训练任务训练任务训练任务", "--", "true")
    cli("submit", "--gpus", "4", "--name", "plain", "--", "true")
    _, out, _ = cli("queue")
    lines = [line for line in out.splitlines() if line.strip()]
    from cli.queue_table import cells
    assert max(cells(line) for line in lines) <= 80
    header = next(line for line in lines if line.lstrip().startswith("POS"))
    team_at = header.index("TEAM")
    for line in lines:
        if "训练" in line or " plain " in line:      # the team column starts in the same cell on every row
            assert cells(line[:line.index("default")]) == team_at


def test_filters_by_user_team_state_and_mine(cli, monkeypatch):
    ann = submit_as(cli, "ann", "vision")
    bob = submit_as(cli, "bob", "nlp", resources={"gpus": 4})
    held = submit_as(cli, "bob", "nlp", hold=True)

    def ids(*args):
        data = cli.json("queue", *args)
        return [p["id"] for p in data["pending"]]

    assert ids("--user", "ann") == ids("-u", "ann") == ann
    assert ids("--team", "nlp") == bob + held
    assert ids("--state", "held") == held and ids("--state", "pending,held") == ann + bob + held
    monkeypatch.setattr("getpass.getuser", lambda: "bob")
    assert ids("--mine") == bob + held and ids("--mine", "--state", "pending") == bob
    code, _, err = cli("queue", "--state", "queued")
    assert code == 2 and err.count("\n") == 1 and "queued is not one of pending, awaiting approval" in err
    code, _, err = cli("queue", "--mine", "--user", "ann")
    assert code == 2 and "give one" in err


def test_time_limit_column_and_json(cli):
    cli("submit", "--time", "90m", "--", "true")
    _, out, _ = cli("queue")
    assert "LIMIT" in out and "1h30m" in out
    assert cli.json("queue")["pending"][0]["time_limit"] == 5400


@pytest.mark.parametrize("columns", [100, 80, 60])
def test_no_line_is_longer_than_the_terminal_and_the_reason_folds_whole(cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    cli("submit", "--gpus", "4", "--time", "2h", "--name", "a-very-long-experiment-name-indeed", "--", "true")
    cli("submit", "--array", "0-20:2", "--gpus", "3", "--time", "10m", "--", "true")
    cli("submit", "--after", "afterok:1", "--", "true")
    _, explained, _ = cli("queue", "--explain")
    _, out, _ = cli("queue")
    assert max(len(line) for line in (explained + out).splitlines()) <= columns
    reasons = {e["id"]: e["reason"] for e in cli.json("queue")["pending"]}
    flat = " ".join(out.split())
    for reason in set(reasons.values()):
        assert " ".join(reason.split()) in flat, reason     # folded onto more lines, never cut
    assert ("a-very-long…" in out) == (columns >= 100)   # names are cut; at 80 columns the column goes
    assert ("LIMIT" in out.split("pending")[1]) == (columns >= 80)


def test_status_tells_a_pending_jobs_reason_position_and_eta_as_the_queue_does(cli):
    cli("submit", "--array", "0-5", "--gpus", "2", "--time", "1h", "--", "true")
    queue = {p["id"]: p for p in cli.json("queue")["pending"]}
    for ref in ("1_0", "1_4"):
        status = cli.json("status", ref)
        assert (status["reason"], status["position"]) == (queue[ref]["reason"], queue[ref]["position"])
        assert status["eta"] == pytest.approx(queue[ref]["eta"], abs=2)   # both from their own now
    group = {j["id"]: j for j in cli.json("status", "1")["jobs"]}
    assert all((group[i]["position"], group[i]["reason"]) == (queue[i]["position"], queue[i]["reason"])
               for i in queue)
    _, out, _ = cli("status", "1_4")
    assert f"position   {queue['1_4']['position']} in the queue's start order; eta in " in out
    assert queue["1_4"]["reason"] in out


@pytest.mark.slow
def test_mine_on_aws_is_the_caller_the_api_sees(aws):
    aws.json("alice", "submit", "--array", "0-2", "--", "true")
    aws.json("bob", "submit", "--", "true")
    aws.admit()
    mine = aws.json("bob", "queue", "--mine")["pending"]
    assert [p["id"] for p in mine] == ["2"] and mine[0]["owner"] == aws.json("bob", "whoami")["owner"]
    code, out, _ = aws("alice", "queue", "--mine")
    assert code == 0 and [r[1] for r in pending_rows(out)] == ["1_[0-2]"]


def test_with_the_daemon_stopped_no_job_is_starting_now(cli):
    """No daemon runs: the job a pass would start says so and why, with no ETA, in `gqa queue`,
    `gqa status` and their JSON alike; a job that waits for GPUs still says what it waits for."""
    from cli.queue_table import WOULD_START

    cli("submit", "--gpus", "4", "--", "true")
    cli("submit", "--gpus", "4", "--", "true")
    first, second = cli.json("queue")["pending"]
    assert (first["reason"], first["eta"]) == (WOULD_START, None)
    assert second["reason"] == "needs 4 GPUs, 0 free"
    _, out, _ = cli("queue")
    assert "starting now" not in out and re.search(r" - +would start now: ", out)   # no ETA
    assert " ".join(WOULD_START.split()) in " ".join(out.split())
    status = cli.json("status", "1")
    assert (status["reason"], status["position"], status["eta"]) == (WOULD_START, 1, None)
    _, out, _ = cli("status", "1")
    assert f"reason {WOULD_START}" in " ".join(out.split())
    assert "position   1 in the queue's start order; eta -\n" in out
    group = cli.json("status", "1")
    assert "starting now" not in json.dumps(group)
