"""`gqa ui`'s web application through Starlette's TestClient, over a backend
that answers fixed views: what the snapshot shows, that the page needs nothing
from another origin, that it is read-only, and its figures."""

import io
import re
import warnings
from dataclasses import dataclass, field

import pytest

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*httpx2")   # newer Starlette prefers httpx2; httpx still works
    from starlette.testclient import TestClient

from cli.ui_server import STATIC, create_app
from cli.ui_view import EVENTS, PALETTE, SHOWN
from gqa.models.errors import BackendUnavailable
from gqa.models.job import JobState
from gqa.ports import JobEvent
from gqa.models.accounting import summarise
from gqa.reporting.figures import FIGURES
from gqa.scheduling import Policy, TeamPolicy
from gqa.services.overview import GpuSlot, HeadEntry, Overview, RunningJob, TeamLoad
from gqa.services.quota import QuotaView, TeamQuota
from tests.builders import NOW, job_record

LOCAL = "http://127.0.0.1"


def running(id, team, gpus, elapsed, util=None):
    return RunningJob(id, f"job-{id}", "alice", team, "running", tuple(gpus), NOW - elapsed, elapsed, 3600 - elapsed,
                      util, None if util is None else 20_480.0, "")


def waiting(id, team, gpus, position, reason, eta=None):
    return HeadEntry(position, id, f"job-{id}", "bob", team, 1, gpus, "pending", NOW - 125, eta, reason)


def overview(head=None, run=None, teams=None, gpus=4, pending=None, events=()):
    run = [running("3", "ml", (0, 1), 300, util=87.4), running("4", "vision", (3,), 7200)] if run is None else run
    head = [waiting("6", "ml", 2, 1, "needs 2 GPUs, 1 free", NOW + 3600),
            waiting("7", "default", 1, 2, "team ml at 2 of 3 GPUs")] if head is None else head
    on = {i: j for j in run for i in j.gpus}
    teams = [TeamLoad("ml", 2, 3, 85.0, 100.0), TeamLoad("vision", 1, None, 3.5, None)] if teams is None else teams
    return Overview(NOW, "2026-11", [GpuSlot(i, "a10g", i == 3, on.get(i)) for i in range(gpus)], run,
                    len(head) if pending is None else pending, head, teams, list(events))


class Answers:
    """A read service of the backend: overview(), rows() (the history) or show() (quotas)."""

    def __init__(self, backend, name):
        self.backend, self.name = backend, name

    def _answer(self, *args, **kw):
        self.backend.reads.append((self.name, *args, *kw.values()))
        value = getattr(self.backend, self.name)
        if isinstance(value, Exception):
            raise value
        return value

    overview = rows = show = _answer


def finished(id, team, hours, gpus=2):
    """A job that ran `hours` and ended an hour ago, as the history lists it."""
    start = NOW - 3600 - hours * 3600
    job = job_record(id=id, group=id, team=team, gpus=gpus, state=JobState.SUCCEEDED, submitted_at=start - 600,
                     started_at=start, ended_at=NOW - 3600, gpu_seconds=hours * 3600 * gpus, attempts=1, exit_code=0)
    return summarise(job, NOW)


@dataclass
class Backend:
    """The backend as cli/backend.py hands it out, answering a fixed overview, history and quotas;
    it has no other service (one that could change something would fail the test)."""

    view: Overview | Exception
    rows_: list | Exception = field(default_factory=lambda: [finished("1", "ml", 3), finished("2", "vision", 1)])
    quotas: QuotaView = field(default_factory=lambda: QuotaView(
        [TeamQuota("ml", TeamPolicy(max_gpus=3, budget=100.0), 2, True)], Policy()))
    reads: list = field(default_factory=list)

    def overview(self):
        return Answers(self, "view")

    def history(self):
        return Answers(self, "rows_")

    def quota(self):
        return Answers(self, "quotas")


def backend(**kw):
    return Backend(overview(**kw))


def client(be, **kw):
    return TestClient(create_app(be, "the local queue at /q", clock=lambda: NOW, **kw), base_url=LOCAL)


def test_the_snapshot_shows_the_gpus_the_running_jobs_the_queue_in_order_and_the_teams():
    event = JobEvent("9", "job-9", JobState.SUCCEEDED, NOW - 90, "exit 0")
    be = backend(events=[event])
    with client(be) as c:
        answer = c.get("/api/snapshot")
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    assert be.reads == [("view", SHOWN, EVENTS)]
    data = answer.json()
    assert data["source"] == "the local queue at /q" and data["refresh"] == 3.0 and data["period"] == "2026-11"
    assert data["gpus"]["total"] == 4 and data["gpus"]["in_use"] == 3
    assert [(c["index"], c["job"], c["team"], c["util"], c["spot"]) for c in data["gpus"]["cells"]] == [
        (0, "3", "ml", "87%", False), (1, "3", "ml", "87%", False), (2, None, None, None, False),
        (3, "4", "vision", "-", True)]
    assert [(j["id"], j["gpus"], j["elapsed"], j["left"], j["util"], j["memory"]) for j in data["running"]] == [
        ("3", [0, 1], "5m00s", "55m00s", "87%", "20.0 GiB"), ("4", [3], "2h00m", "0s", "-", "-")]
    assert [(j["position"], j["id"], j["priority"], j["waiting"], j["eta"], j["reason"]) for j in data["pending"]] \
        == [(1, "6", "normal", "2m05s", "in 1h00m", "needs 2 GPUs, 1 free"),
            (2, "7", "normal", "2m05s", "-", "team ml at 2 of 3 GPUs")]
    assert data["teams"] == [
        {"team": "ml", "gpus_in_use": 2, "max_gpus": 3, "spent": 85.0, "budget": 100.0, "used": 0.85,
         "used_text": "85%", "level": "near"},
        {"team": "vision", "gpus_in_use": 1, "max_gpus": None, "spent": 3.5, "budget": None, "used": None,
         "used_text": "-", "level": ""}]
    assert data["events"] == [{"ago": "1m30s", "id": "9", "name": "job-9", "status": "completed",
                               "reason": "exit 0"}]
    assert data["colours"] == {"default": PALETTE[0], "ml": PALETTE[1], "vision": PALETTE[2]}
    assert [p["name"] for p in data["plots"]] == list(FIGURES)


def test_a_launched_job_not_started_yet_shows_what_it_waits_for():
    launched = RunningJob("5", "job-5", "alice", "ml", "starting", (2,), None, 0.0, None, None, None,
                          "waiting for an instance: 3m so far")
    with client(backend(run=[launched])) as c:
        [job] = c.get("/api/snapshot").json()["running"]
    assert (job["status"], job["elapsed"], job["left"]) == ("starting", "waiting for an instance: 3m so far", "-")


def test_a_long_queue_shows_its_head_with_its_whole_count():
    head = [waiting(str(i), "ml", 1, i, "needs 1 GPU, 0 free") for i in range(1, SHOWN + 1)]
    with client(backend(head=head, pending=100_000)) as c:
        data = c.get("/api/snapshot").json()
    assert len(data["pending"]) == SHOWN and data["pending_total"] == 100_000


def test_a_queue_that_cannot_be_read_is_a_503_with_the_reason():
    be = Backend(BackendUnavailable("the queue daemon at /q is not running"))
    with client(be) as c:
        answer = c.get("/api/snapshot")
    assert answer.status_code == 503
    assert answer.json() == {"error": "the queue daemon at /q is not running", "refresh": 3.0}


def test_polls_within_a_second_share_one_read_and_the_figures_one_report_a_minute():
    be, now = backend(), [NOW]
    app = create_app(be, "q", clock=lambda: now[0])
    with TestClient(app, base_url=LOCAL) as c:
        c.get("/api/snapshot")
        c.get("/api/snapshot")
        assert [r[0] for r in be.reads] == ["view"]
        first = c.get("/api/snapshot").json()["plots"]
        c.get("/plots/teams.png")
        c.get("/plots/outcomes.png")
        # one report for both: the day's history read once, the quotas for budgets, the overview for pools
        assert sorted(r[0] for r in be.reads) == ["quotas", "rows_", "view", "view"]
        now[0] += 1.5
        c.get("/api/snapshot")
        c.get("/plots/teams.png")
        assert [r[0] for r in be.reads].count("view") == 3 and [r[0] for r in be.reads].count("rows_") == 1
        now[0] += 60
        assert c.get("/api/snapshot").json()["plots"] != first      # the page fetches the new figures
        c.get("/plots/teams.png")
    assert [r[0] for r in be.reads].count("rows_") == 2


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("path", ["/", "/api/snapshot", "/plots/gpus.png", "/static/ui.js", "/jobs/1/cancel"])
def test_it_is_read_only_every_other_method_is_405_on_every_path(method, path):
    be = backend()
    with client(be) as c:
        answer = c.request(method, path)
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, HEAD"
    assert be.reads == []


def test_it_answers_only_requests_addressed_to_a_loopback_name():
    with client(backend()) as c:
        assert c.get("/api/snapshot", headers={"host": "attacker.example:8765"}).status_code == 400
        for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
            assert c.get("/api/snapshot", headers={"host": host}).status_code == 200, host
    with client(backend(), loopback_only=False) as c:     # served on another address on purpose
        assert c.get("/api/snapshot", headers={"host": "gpu-box.lan:8765"}).status_code == 200


@pytest.mark.parametrize("host, header", [
    ("127.0.0.2", "127.0.0.2:8765"),            # another loopback address
    ("Gpu-Box", "gpu-box:8765"),                # the machine's name, where it resolves to 127.0.1.1
    ("::1", "[::1]:8765"),
])
def test_it_answers_requests_addressed_to_the_loopback_name_it_was_served_on(host, header):
    with client(backend(), host=host) as c:
        assert c.get("/api/snapshot", headers={"host": header}).status_code == 200
        assert c.get("/api/snapshot", headers={"host": "attacker.example:8765"}).status_code == 400


def test_the_page_loads_only_its_own_files():
    with client(backend()) as c:
        page = c.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        linked = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sorted(linked) == ["/static/ui.css", "/static/ui.js"]
        for path in linked:
            assert c.get(path).status_code == 200, path
    for f in STATIC.iterdir():
        text = f.read_text()
        assert not re.search(r"https?://|//cdn|@import|<script>", text), f"{f.name} reaches out or inlines script"


def _colours(png: bytes) -> dict[tuple[int, int, int], int]:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    return {rgb: n for n, rgb in image.getcolors(maxcolors=1 << 20)}


def test_the_plots_are_the_reports_figures_over_the_last_day():
    be = backend()
    with client(be) as c:
        answers = {name: c.get(f"/plots/{name}.png") for name in FIGURES}
        assert c.get("/plots/nothing.png").status_code == 404
    from PIL import Image

    for name, answer in answers.items():
        assert answer.status_code == 200 and answer.headers["content-type"] == "image/png", name
        assert Image.open(io.BytesIO(answer.content)).size == (800, 360), name
    [query] = [r[1] for r in be.reads if r[0] == "rows_"]
    assert (query.since, query.until, query.team) == (NOW - 86400, NOW, None)
    hours = (31, 119, 180)        # the teams figure's GPU-hours bars: ml's 6 fill most of its left half
    assert _colours(answers["teams"].content).get(hours, 0) > 5000
    succeeded = (44, 160, 44)     # the outcomes figure: two jobs succeeded
    assert _colours(answers["outcomes"].content).get(succeeded, 0) > 5000


def test_plots_of_a_history_that_cannot_be_read_are_a_503_with_the_reason():
    be = backend()
    be.rows_ = BackendUnavailable("the gqa API answered 500")
    with client(be) as c:
        answer = c.get("/plots/teams.png")
        assert c.get("/api/snapshot").status_code == 200      # the queue is still shown
    assert answer.status_code == 503 and answer.text == "the gqa API answered 500"


@pytest.mark.parametrize("args, error", [
    (["--port", "70000"], "--port must be from 0 to 65535, got 70000"),
    (["--host", "no-such-host.invalid"], "--host no-such-host.invalid: cannot resolve it"),
    (["--host", "192.0.2.1"], "cannot serve on 192.0.2.1:8765: "),     # an address not this machine's
])
def test_an_address_it_cannot_serve_on_is_one_line_and_exit_2(cli, args, error):
    code, out, err = cli("ui", *args)
    assert code == 2 and out == ""
    assert err.startswith(f"gqa: error: {error}") and err.count("\n") == 1, err


@pytest.mark.aws
@pytest.mark.slow
def test_on_aws_the_page_reads_the_api_with_the_callers_own_keys(aws):
    from cli.backend import backend as configured
    from tests.aws.api_gateway import ENDPOINT

    code, _, err = aws("alice", "submit", "--gpus", "1", "--name", "bert", "--", "python", "train.py")
    assert code == 0, err
    aws.admit()
    with TestClient(create_app(configured(), "gqa on AWS"), base_url=LOCAL) as c:
        data = c.get("/api/snapshot").json()
    assert [(j["id"], j["name"], j["owner"]) for j in data["pending"]] == [("1", "bert", "alice")]
    assert data["gpus"]["total"] == 12
    sent = aws.gateway.seen[-1]
    assert (sent["method"], sent["url"].split("?")[0]) == ("GET", f"{ENDPOINT}/overview")
    assert sent["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAALICE")


def test_jobs_on_gpus_a_shrunk_queue_no_longer_lists_show_as_gqa_top_shows_them(cli):
    """A daemon restarted with 2 of its 4 GPUs (--keep-jobs) adopts the job still on GPUs 2 and 3:
    the page shows those GPUs with their job, pool "outside", and says how many there are."""
    from cli.backend import backend
    from cli.ui_view import page_data, read
    from gqa.ports import Inventory
    from tests.builders import gpus
    from tests.cli.test_top import running as started

    kept, moved = started(cli, "kept", (0, 1)), started(cli, "moved", (2, 3))
    cli.store.set_inventory(Inventory(gpus=gpus(2, "a10g")))
    data = page_data(read(backend()), source="here")
    assert [(c["index"], c.get("pool"), c["type"], c["job"]) for c in data["gpus"]["cells"]] == [
        (0, "on-demand", "a10g", kept), (1, "on-demand", "a10g", kept), (2, "outside", "-", moved),
        (3, "outside", "-", moved)]
    assert data["gpus"]["total"] == data["gpus"]["in_use"] == 2 and data["gpus"]["outside"] == 2
    assert data["gpus"]["outside_text"] == "2 more held by jobs started before the queue shrank"
    _, out, _ = cli("top", "--once")
    assert [(line.split()[0], line.split()[1], line.split()[-2]) for line in out.splitlines()[3:7]] == [
        (str(c["index"]), c["job"], c["pool"]) for c in data["gpus"]["cells"]]
