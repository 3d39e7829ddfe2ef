"""A shared box's GET /queue answers from the view the daemon keeps
(daemon/queue_keeper.py) while the store is at its revision, and computes
the queue after any write since; its pages come from one view."""

from dataclasses import dataclass, replace
from functools import cached_property

import pytest

from cli.backend import LocalBackend
from daemon.queue_keeper import QueueKeeper
from daemon.routes import Router
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu
from gqa.services.access import LocalAccess

ACCESS = LocalAccess(admins=frozenset({"root"}))
ALICE = ACCESS.principal("alice", [])


@dataclass
class Box(LocalBackend):
    """The daemon's wiring as the routes see it: the store, the services and the keeper (a shared box's: no file)."""

    @cached_property
    def queue_keeper(self) -> QueueKeeper:
        return QueueKeeper(self, write_file=False)


@pytest.fixture
def box(tmp_path):
    be = Box(tmp_path / "home")
    be.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(4)), cpus=8, memory=64 << 30))
    return Router(be, ACCESS), be


def submit(router, count: int = 1) -> None:
    spec = {"command": ["true"], "workdir": "/"} | ({"array": f"0-{count - 1}"} if count > 1 else {})
    status, answer = router.handle(ALICE, "POST", "/jobs", None, {"spec": spec})
    assert status == 201, answer


def marked(keeper: QueueKeeper) -> None:
    """The kept view's reasons changed, so a test sees which view answered."""
    kept = keeper.kept
    keeper.kept = replace(kept, pending=[replace(e, reason="told by the kept view") for e in kept.pending])


def reasons(router, **query) -> set[str]:
    status, answer = router.handle(ALICE, "GET", "/queue", query or None, None)
    assert status == 200, answer
    return {e["reason"] for e in answer["pending"]}


def test_get_queue_answers_from_the_kept_view_while_current(box):
    router, be = box
    submit(router, 3)
    assert be.queue_keeper.keep_now()
    marked(be.queue_keeper)
    assert reasons(router) == {"told by the kept view"}
    status, answer = router.handle(ALICE, "GET", "/queue", {"group": "1", "limit": "2"}, None)
    assert [e["job"]["id"] for e in answer["pending"]] == ["1_0", "1_1"] and answer["next"]
    assert not be.paths.queue_view.exists()   # a shared box's view stays in the daemon: users cannot read its home


def test_after_a_write_get_queue_computes_the_queue(box):
    router, be = box
    submit(router)
    assert be.queue_keeper.keep_now()
    marked(be.queue_keeper)
    submit(router)
    assert "told by the kept view" not in reasons(router)
