"""A shared box's GET /history (daemon/routes.py), and the CLI's proxy of
HistoryService over it (cli/aws_backend.History): the same summaries as the
service in-process, page after page."""

import time

import pytest

from cli.aws_backend import History
from cli.backend import LocalBackend
from daemon.routes import Router
from gqa.models.job import JobState
from gqa.ports import Change, Inventory
from gqa.scheduling.snapshot import Gpu
from gqa.services.access import LocalAccess
from gqa.services.history import HistoryQuery
from tests.contract.jobs import new_job

S = JobState
ACCESS = LocalAccess(admins=frozenset({"root"}))


class OverRouter:
    """SocketApi's .call, answered by the router in-process (as the daemon's socket would)."""

    def __init__(self, router: Router, user: str):
        self.router, self.caller = router, ACCESS.principal(user, [])

    def call(self, method, path, *, query=None, body=None):
        status, answer = self.router.handle(self.caller, method, path,
                                            {k: str(v) for k, v in (query or {}).items() if v is not None}, body)
        assert status == 200, answer
        return answer


@pytest.fixture
def box(tmp_path):
    be = LocalBackend(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(4))))
    now = time.time()
    for k in range(5):
        [job] = be.store.create([new_job(submitted_at=now - 100, owner="alice" if k % 2 else "bob")])
        be.store.apply([Change(job.id, S.QUEUED, S.CANCELLED, "cancelled by user", now - 50 + k,
                               {"ended_at": now - 50 + k})])
    return Router(be, ACCESS), be, now


def test_any_user_reads_the_same_summaries_as_the_service(box):
    router, be, now = box
    query = HistoryQuery(since=now - 3600, limit=2)
    proxied = list(History(OverRouter(router, "carol")).rows(query))
    direct = list(be.history().rows(query))
    assert [r.id for r in proxied] == ["5", "4", "3", "2", "1"] == [r.id for r in direct]
    assert [(r.state, r.wait, r.ended_at) for r in proxied] == [(r.state, r.wait, r.ended_at) for r in direct]
    page = History(OverRouter(router, "carol")).list(query)
    assert len(page.rows) == 2 and page.next is not None
    mine = History(OverRouter(router, "alice")).list(HistoryQuery(since=now - 3600, owner="alice"))
    assert [r.id for r in mine.rows] == ["4", "2"] and mine.next is None


def test_a_bad_query_is_400(box):
    router, _, _ = box
    status, answer = router.handle(ACCESS.principal("alice", []), "GET", "/history", {"since": "x"}, None)
    assert (status, answer["error"]) == (400, "SpecError") and "since must be a time" in answer["message"]
