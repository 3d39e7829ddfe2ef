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

from cli import ui_plots
from cli.ui_server import STATIC, create_app
from cli.ui_view import PALETTE, SHOWN
from gqa.models.errors import BackendUnavailable, NotPermitted
from gqa.models.job import JobState
from gqa.scheduling import Policy, TeamPolicy
from gqa.services.cost import CostReport, TeamCost
from gqa.services.queries import QueueEntry, QueueView
from gqa.services.quota import QuotaView, TeamQuota
from tests.builders import NOW, job_record

LOCAL = "http://127.0.0.1"


def running(id, team, gpus, started):
    return job_record(id=id, group=id, team=team, owner="alice", gpus=len(gpus), assigned=tuple(gpus),
                      state=JobState.RUNNING, started_at=started, attempts=1, submitted_at=started - 60)


def waiting(id, team, gpus, position, reason, eta=None):
    return QueueEntry(job_record(id=id, group=id, team=team, owner="bob", gpus=gpus, submitted_at=NOW - 125),
                      position, reason, None, eta)


class Service:
    """One of the backend's read services, answering a fixed view (or raising it)."""

    def __init__(self, views, name):
        self.views, self.name = views, name

    def _give(self):
        self.views.reads.append(self.name)
        value = getattr(self.views, self.name + "_view")
        if isinstance(value, Exception):
            raise value
        return value

    queue = show = report = _give


@dataclass
class Backend:
    """The services as cli/backend.py hands them out; asking for any other
    (one that could change something) fails the test."""

    queue_view: QueueView | Exception
    quota_view: QuotaView | Exception
    cost_view: CostReport | Exception
    reads: list[str] = field(default_factory=list)

    def queries(self):
        return Service(self, "queue")

    def quota(self):
        return Service(self, "quota")

    def cost(self):
        return Service(self, "cost")

    def __getattr__(self, name):
        raise AssertionError(f"the page asked the backend for {name}")


def backend(pending=None, run=None, quota=None, cost=None, gpus=4):
    run = [running("3", "ml", (0, 1), NOW - 300), running("4", "vision", (3,), NOW - 7200)] if run is None else run
    pending = [waiting("6", "ml", 2, 1, "needs 2 GPUs, 1 free", NOW + 3600),
               waiting("7", "default", 1, 2, "team ml at 2 of 3 GPUs")] if pending is None else pending
    free = gpus - sum(len(j.assigned) for j in run)
    quota = QuotaView([TeamQuota("ml", TeamPolicy(share=2, max_gpus=3, budget=100.0), 2, True)],
                      Policy()) if quota is None else quota
    cost = CostReport("2026-11", True, [TeamCost("ml", 80.0, 5.0, 100.0),
                                        TeamCost("vision", 3.5, 0.0, None)]) if cost is None else cost
    return Backend(QueueView(pending, run, gpus, free), quota, cost)


def client(be, **kw):
    return TestClient(create_app(be, "the local queue at /q", clock=lambda: NOW, **kw), base_url=LOCAL)


def test_the_snapshot_shows_the_gpus_the_running_jobs_the_queue_in_order_and_the_teams():
    with client(backend()) as c:
        answer = c.get("/api/snapshot")
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    data = answer.json()
    assert data["source"] == "the local queue at /q" and data["refresh"] == 3.0
    assert data["gpus"]["total"] == 4 and data["gpus"]["in_use"] == 3
    assert [(c["index"], c["job"], c["team"]) for c in data["gpus"]["cells"]] == [
        (0, "3", "ml"), (1, "3", "ml"), (2, None, None), (3, "4", "vision")]
    assert [(j["id"], j["gpus"], j["elapsed"]) for j in data["running"]] == [("3", [0, 1], "5m00s"),
                                                                             ("4", [3], "2h00m")]
    assert [(j["position"], j["id"], j["waiting"], j["eta"], j["reason"]) for j in data["pending"]] == [
        (1, "6", "2m05s", "in 1h00m", "needs 2 GPUs, 1 free"), (2, "7", "2m05s", "-", "team ml at 2 of 3 GPUs")]
    assert data["teams"] == [
        {"team": "ml", "share": 2, "gpus_in_use": 2, "max_gpus": 3, "budget": 100.0, "spent": 85.0, "used": 0.85},
        {"team": "vision", "share": None, "gpus_in_use": None, "max_gpus": None, "budget": None, "spent": 3.5,
         "used": None}]
    assert data["period"] == "2026-11"
    assert data["colours"] == {"default": PALETTE[0], "ml": PALETTE[1], "vision": PALETTE[2]}
    assert [p["name"] for p in data["plots"]] == list(ui_plots.FIGURES)


def test_a_long_queue_is_cut_to_the_first_jobs_with_its_whole_count():
    many = [waiting(str(i), "ml", 1, i, "needs 1 GPU, 0 free") for i in range(1, SHOWN + 51)]
    with client(backend(pending=many)) as c:
        data = c.get("/api/snapshot").json()
    assert len(data["pending"]) == SHOWN and data["pending_total"] == SHOWN + 50
    assert data["pending"][-1]["position"] == SHOWN


def test_a_queue_that_cannot_be_read_is_a_503_with_the_reason_and_the_page_keeps_polling():
    be = backend()
    be.queue_view = BackendUnavailable("the queue daemon at /q is not running")
    with client(be) as c:
        answer = c.get("/api/snapshot")
        plot = c.get("/plots/gpus.png")
    assert answer.status_code == 503
    assert answer.json() == {"error": "the queue daemon at /q is not running", "refresh": 3.0}
    assert plot.status_code == 503 and "not running" in plot.text


def test_teams_the_caller_may_not_read_leave_the_queue_shown_with_why():
    be = backend(quota=NotPermitted("reading quotas needs the admin role"))
    with client(be) as c:
        data = c.get("/api/snapshot").json()
    assert data["errors"] == {"teams": "reading quotas needs the admin role"}
    assert [j["id"] for j in data["pending"]] == ["6", "7"]
    assert [t["team"] for t in data["teams"]] == ["ml", "vision"]     # from the spend, still


def test_polls_within_a_second_share_one_read():
    be, now = backend(), [NOW]
    app = create_app(be, "q", clock=lambda: now[0])
    with TestClient(app, base_url=LOCAL) as c:
        c.get("/api/snapshot")
        c.get("/api/snapshot")
        c.get("/plots/gpus.png")
        assert be.reads == ["queue", "quota", "cost"]
        now[0] += 1.5
        c.get("/api/snapshot")
    assert be.reads == ["queue", "quota", "cost"] * 2


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


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_each_figure_is_a_png_with_each_teams_bar_in_its_colour():
    with client(backend()) as c:
        colours = c.get("/api/snapshot").json()["colours"]
        gpus = c.get("/plots/gpus.png")
        spend = c.get("/plots/spend.png")
        pending = c.get("/plots/pending.png")
        assert c.get("/plots/nothing.png").status_code == 404
    for answer in (gpus, spend, pending):
        assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
        assert answer.content.startswith(b"\x89PNG")
    bar = 200     # pixels: a bar of a team is well over this
    assert _colours(gpus.content).get(_rgb(colours["ml"]), 0) > bar
    assert _colours(gpus.content).get(_rgb(colours["vision"]), 0) > bar
    assert _colours(spend.content).get(_rgb(colours["ml"]), 0) > bar
    assert _colours(pending.content).get(_rgb(colours["default"]), 0) > bar
    assert _colours(pending.content).get(_rgb(colours["vision"]), 0) == 0     # vision waits for nothing


def test_figures_of_an_empty_queue_say_so():
    empty = backend(pending=[], run=[], quota=QuotaView([], Policy()), cost=CostReport("2026-11", True, []))
    with client(empty) as c:
        png = c.get("/plots/gpus.png").content
    assert not any(_colours(png).get(_rgb(colour)) for colour in PALETTE)
