"""`gqa report` on a personal queue whose jobs ran and ended an hour or two ago
(driven through the supervisor with fake compute): the page and its figures
are written, the numbers are the jobs', and bad input writes nothing."""

from __future__ import annotations

import re
import time

import pytest

from gqa.models.job import JobState
from gqa.ports import Change, Exit, Inventory
from gqa.reporting import FIGURES
from gqa.scheduling.snapshot import Gpu
from gqa.services.quota import QuotaService
from gqa.services.submit import SubmitService
from gqa.services.supervisor import Supervisor
from tests.builders import spec
from tests.services.fakes import CountingWaker, FakeClock, FakeCompute, FixedRandom


def run_jobs(store) -> dict[str, str]:
    """Three jobs of two teams, the first three hours ago: one succeeds with its GPUs
    mostly idle, one fails, one waits for GPUs and then succeeds."""
    inventory = Inventory(gpus=tuple(Gpu(i, "a10g", price=2.0) for i in range(4)), cpus=8, memory=64 << 30)
    store.set_inventory(inventory)
    QuotaService(store).set("vision", budget=1000.0)
    clock = FakeClock(time.time() - 3 * 3600)
    supervisor = Supervisor(store, FakeCompute(inventory), clock, FixedRandom(0.5), grace=7.0)
    submit = SubmitService(store, clock, CountingWaker()).submit
    [idle] = submit(spec(name="idle", team="vision", resources={"gpus": 2}, limits={"wall_time": "2h"}))
    [failing] = submit(spec(name="crash", team="nlp", priority="high", resources={"gpus": 2}))
    [waiting] = submit(spec(name="later", team="vision", priority="low", resources={"gpus": 4},
                          limits={"wall_time": "2h"}))
    supervisor.dispatch()
    store.apply([Change(idle.id, JobState.RUNNING, None, "", clock.now(), {"gpu_util": 4.0})])
    clock.advance(1800)
    supervisor.on_exits([Exit(idle.id, 1, 0, None), Exit(failing.id, 1, 3, None)])
    supervisor.dispatch()
    clock.advance(3600)
    supervisor.on_exits([Exit(waiting.id, 1, 0, None)])
    return {"idle": idle.id, "failing": failing.id, "waiting": waiting.id}


@pytest.mark.slow
def test_report_writes_the_page_and_figures_with_the_jobs_numbers(cli, tmp_path):
    ids = run_jobs(cli.store)
    data = cli.json("report", "--out", str(tmp_path / "out"))
    assert data["page"] == str(tmp_path / "out" / "report.html")
    assert sorted(data["figures"]) == sorted(FIGURES)
    for path in data["figures"].values():
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    report = data["report"]
    assert report["jobs"] == 3
    assert report["outcomes"]["succeeded"] == 2 and report["outcomes"]["failed"] == 1
    teams = {t["team"]: t for t in report["teams"]}
    assert teams["vision"]["gpu_hours"] == pytest.approx(2 * 0.5 + 4 * 1.0, abs=0.01)
    assert teams["vision"]["cost"] == pytest.approx(2 * 2.0 * 0.5 + 4 * 2.0 * 1.0, abs=0.05)
    assert 1000.0 * 7 / 31 <= teams["vision"]["budget"] <= 1000.0 * 7 / 28    # a week of the month's budget
    assert report["pools"] == [{"pool": "a10g on demand", "gpus": 4, "gpu_hours": pytest.approx(6.0, abs=0.01),
                                "allocated": pytest.approx(6.0 / (4 * 7 * 24), rel=0.01),
                                "measured_utilisation": pytest.approx(4.0)}]
    waits = {w["tier"]: w for w in report["waits"]}
    assert waits["low"]["p50"] == pytest.approx(1800, abs=1)       # it waited for the first two to end
    assert report["wait_reasons"][0] == {"why": "GPUs or quota", "jobs": 1, "seconds": pytest.approx(1800, abs=1),
                                         "longest": pytest.approx(1800, abs=1), "longest_job": ids["waiting"]}
    assert report["idle"]["jobs"] == report["idle"]["measured"] == 1
    assert report["idle"]["listed"][0]["id"] == ids["idle"]
    assert report["idle"]["gpu_hours_wasted"] == pytest.approx(2 * 0.5 * 0.96, abs=0.01)
    page = (tmp_path / "out" / "report.html").read_text()
    assert not re.search(r"(?:src|href)\s*=\s*[\"']?https?:", page)
    assert page.count("data:image/png;base64,") == len(FIGURES)


@pytest.mark.slow
def test_report_of_one_team_and_a_window_and_the_summary_lines(cli, tmp_path):
    run_jobs(cli.store)
    data = cli.json("report", "--team", "nlp", "--since", "1d", "--out", str(tmp_path / "nlp"))
    assert data["report"]["jobs"] == 1 and [t["team"] for t in data["report"]["teams"]] == ["nlp"]
    # a window that ended before the jobs ran: nothing in it, and the page says so
    data = cli.json("report", "--since", "3d", "--until", "2d", "--out", str(tmp_path / "empty"))
    assert data["report"]["jobs"] == 0
    code, out, err = cli("report", "--out", str(tmp_path / "table"))
    assert code == 0, err
    assert "3 jobs from" in out and "1 job held GPUs idle" in out and "report.html" in out


@pytest.mark.slow
def test_a_period_counts_the_waits_of_the_jobs_that_started_in_it_only(cli, tmp_path):
    """The last two hours hold the job that waited for GPUs (it ended an hour and a half ago),
    but it started two and a half hours ago: no start, no wait in the period."""
    run_jobs(cli.store)
    report = cli.json("report", "--since", "2h", "--out", str(tmp_path / "out"))["report"]
    assert report["jobs"] == 1 and report["outcomes"]["succeeded"] == 1
    assert report["waits"] == [{"tier": "low", "started": 0, "p50": None, "p95": None, "longest": None,
                                "waiting": 0}]
    code, out, err = cli("report", "--since", "2h", "--out", str(tmp_path / "table"))
    assert code == 0 and "waits p50/p95" not in out, err


@pytest.mark.parametrize("args, message", [
    (["--since", "yesterday-ish"], "--since 'yesterday-ish': use a time back from now"),
    (["--since", "1d", "--until", "2d"], "--until must be later than --since"),
    (["--since", "2026-11-01T08:00Z", "--until", "2026-11-01T06:00+00:00"],
     "the period ends (2026-11-01 06:00:00 UTC) at or before it begins (2026-11-01 08:00:00 UTC): "
     "--until must be later than --since"),
    (["--since", "800000d"], "--since '800000d' is before 1970-01-01 00:00:00 UTC, earlier than any job"),
    (["--since", "9999-12-31"], "--since '9999-12-31' is after "),
    (["--since", "1d", "--until", "9999-12-31"], "--until '9999-12-31' is after "),
    (["--since", "24"], "--since '24' needs a unit: 24h, 24m or 24s back from now"),
    (["-o", "yaml"], "unknown output format"),
])
def test_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, args, message):
    code, out, err = cli("report", "--out", str(tmp_path / "never"), *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("gqa: error: ")
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("args", [
    ("--since", "24"), ("--since", "20261207"), ("--since", "yesterday"), ("--since", "800000d"),
    ("--since", "1969-12-31"), ("--since", "2026-13-01"), ("--since", "25:00"), ("--until", "90"),
    ("--since", "2026-11-01T08:00Z", "--until", "2026-11-01T06:00Z"),
])
def test_history_and_report_read_since_and_until_alike(cli, tmp_path, args):
    """One grammar: the same text is refused by both commands in the same words."""
    history = cli("history", *args)
    report = cli("report", "--out", str(tmp_path / "never"), *args)
    assert history[0] == report[0] == 2
    assert history[2].replace("window", "period") == report[2] and report[2].count("\n") == 1


def test_a_directory_that_cannot_be_written_is_one_line(cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = cli("report", "--out", str(blocker / "out"))
    assert code == 2 and str(blocker / "out") in err and len(err.strip().splitlines()) == 1
