"""`gqa top` as a command: one frame with --once (or when the output is not a
terminal), one Overview as JSON with -o json, bad input one line and exit 2;
and the overview through a shared box's daemon, whose route the CLI's proxy
reads back into the same Overview. The live, redrawn view on a real terminal
is tests/e2e/test_top_terminal.py's."""

from __future__ import annotations

import pytest

from gqa.models.job import JobState
from gqa.models.loader import validate
from gqa.ports import Change


def running(cli, name: str, gpus: tuple[int, ...]) -> str:
    """A job written through the store as a daemon would have started it."""
    from cli.local_backend import LocalBackend

    [job] = LocalBackend(cli.home).submitter().submit(validate({"command": ["true"], "name": name, "workdir": "/",
                                                                "resources": {"gpus": len(gpus)}}))
    cli.store.apply([Change(job.id, JobState.QUEUED, JobState.STARTING, "assigned", job.submitted_at,
                            {"assigned": gpus})])
    cli.store.apply([Change(job.id, JobState.STARTING, JobState.RUNNING, "attempt 1 started", job.submitted_at,
                            {"attempts": 1, "started_at": job.submitted_at, "gpu_util": 91.0})])
    return job.id


def test_once_prints_one_frame_of_the_gpus_the_head_and_the_teams(cli):
    train = running(cli, "train", (0, 1, 2))
    code, _, err = cli("submit", "--gpus", "2", "--name", "waits", "--", "true")
    assert code == 0, err
    code, out, err = cli("top", "--once")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("gqa top") and lines[1] == "GPUs  3 of 4 busy, 1 job running"
    assert [line.split()[:3] for line in lines[3:7]] == [["0", train, "train"], ["1", train, "train"],
                                                        ["2", train, "train"], ["3", "-", "free"]]
    assert "91%" in lines[3]
    assert "pending  1" in out and "needs 2 GPUs, 1 free" in out and "default" in out
    assert "\x1b[" not in out                          # not a terminal: no escape sequences


def test_json_is_one_overview(cli):
    train = running(cli, "train", (1,))
    view = cli.json("top")
    assert [g["job"]["id"] if g["job"] else None for g in view["gpus"]] == [None, train, None, None]
    assert view["gpus"][1]["job"]["gpu_util"] == 91.0 and view["pending"] == 0 and view["head"] == []
    assert [(e["job_id"], e["state"]) for e in view["events"][:1]] == [(train, "RUNNING")]


@pytest.mark.parametrize("args, error", [
    (("--interval", "0"), "--interval must be a positive number of seconds up to 86,400 (a day), got 0"),
    (("--interval", "-2"), "--interval must be a positive number of seconds up to 86,400 (a day), got -2"),
    (("--interval", "inf"), "--interval must be a positive number of seconds up to 86,400 (a day), got inf"),
    (("--interval", "1e10"), "--interval must be a positive number of seconds up to 86,400 (a day), got 1e+10"),
    (("--interval", "nan"), "--interval must be a positive number of seconds up to 86,400 (a day), got nan"),
    (("-o", "yaml"), "unknown output format 'yaml'; use table or json"),
])
def test_bad_input_is_one_line_and_exit_2(cli, args, error):
    assert cli("top", *args) == (2, "", f"gqa: error: {error}\n")


def test_a_shared_box_answers_the_overview_through_its_daemon(tmp_path):
    from cli.daemon_backend import DaemonBackend
    from gqa.models.errors import SpecError
    from tests.cli.test_daemon_backend import RouterDaemon

    daemon = RouterDaemon(tmp_path)
    try:
        be = DaemonBackend(tmp_path)
        job = be.submitter().submit(validate({"command": ["true"], "name": "next", "workdir": "/",
                                              "resources": {"gpus": 2}})).first
        seen = be.overview().overview(head=5, events=2)
        assert [(e.position, e.id, e.name, e.reason) for e in seen.head] == [(1, job.id, "next", "starting now")]
        assert [(g.index, g.type, g.job) for g in seen.gpus] == [(0, "a10g", None), (1, "a10g", None)]
        assert [(e.job_id, e.state) for e in seen.events] == [(job.id, JobState.QUEUED), (job.id, JobState.SUBMITTED)]
        assert seen.events == daemon.wiring.overview().overview(events=2).events
        with pytest.raises(SpecError, match="head must be at most 200, got 201"):
            be.overview().overview(head=201)
    finally:
        daemon.sock.close()


def test_gpus_jobs_hold_beyond_a_shrunk_queue_are_told_alike_by_top_queue_and_local_status(cli):
    """A daemon restarted with 2 of its 4 GPUs (--keep-jobs) adopts the job still on GPUs 2 and 3."""
    from gqa.ports import Inventory
    from tests.builders import gpus

    kept, moved = running(cli, "kept", (0, 1)), running(cli, "moved", (2, 3))
    cli.store.set_inventory(Inventory(gpus=gpus(2, "a10g")))
    told = "2 more held by jobs started before the queue shrank"
    _, out, _ = cli("queue")
    assert out.splitlines()[0].startswith(f"GPUs: 2 of 2 in use, and {told}")
    assert cli.json("queue")["gpus"] == {"total": 2, "free": 0, "outside": 2}
    _, out, _ = cli("top", "--once")
    lines = out.splitlines()
    assert lines[1].startswith("GPUs  2 of 2 busy, 2 jobs running; 2 more held by")
    assert [line.split()[:3] + line.split()[-2:] for line in lines[3:7]] == [
        ["0", kept, "kept", "on-demand", "a10g"], ["1", kept, "kept", "on-demand", "a10g"],
        ["2", moved, "moved", "outside", "-"], ["3", moved, "moved", "outside", "-"]]
    _, out, _ = cli("local", "status")
    assert f"gpus:   2 (2 a10g); {told}" in out.splitlines()
    assert cli.json("local", "status")["outside_gpus"] == 2
