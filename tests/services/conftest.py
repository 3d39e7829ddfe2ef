"""One queue per test: the real SQLite store on tmp_path, fake compute,
a fake clock and a fixed random draw, and every service wired to them."""

from __future__ import annotations

from typing import Any

import pytest

from gqa.adapters.local.store import SqliteStore
from gqa.models.job import JobRecord
from gqa.ports import Exit, Inventory
from gqa.services.control import ControlService
from gqa.services.queries import QueryService
from gqa.services.submit import SubmitService
from gqa.services.supervisor import Supervisor
from tests.builders import gpus, spec
from tests.services.fakes import CountingWaker, FakeClock, FakeCompute, FixedRandom

T0 = 1_000_000.0
GRACE = 7.0


class Queue:
    def __init__(self, store: SqliteStore, gpu_count: int):
        self.store = store
        self.clock = FakeClock(T0)
        self.rng = FixedRandom(0.5)
        self.waker = CountingWaker()
        inventory = Inventory(gpus=gpus(gpu_count))
        store.set_inventory(inventory)
        self.compute = FakeCompute(inventory)
        self.submitter = SubmitService(store, self.clock, self.waker)
        self.control = ControlService(store, self.clock, self.waker)
        self.queries = QueryService(store, self.clock)
        self.supervisor = self.restart()

    def restart(self) -> Supervisor:
        """A fresh supervisor, as a restarted daemon would build it."""
        self.supervisor = Supervisor(self.store, self.compute, self.clock, self.rng, grace=GRACE)
        return self.supervisor

    def submit(self, **overrides: Any) -> list[JobRecord]:
        return self.submitter.submit(spec(**overrides))

    def submit_one(self, **overrides: Any) -> JobRecord:
        [job] = self.submit(**overrides)
        return job

    def start(self, **overrides: Any) -> JobRecord:
        """Submit one job and dispatch it; it must start."""
        job = self.submit_one(**overrides)
        started = self.supervisor.dispatch()
        assert job.id in [j.id for j in started]
        return self.get(job.id)

    def exit(self, job_id: str, code: int | None = 0, sig: int | None = None, *,
             attempt: int | None = None) -> list[JobRecord]:
        job = self.get(job_id)
        return self.supervisor.on_exits([Exit(job_id, job.attempts if attempt is None else attempt, code, sig)])

    def get(self, job_id: str) -> JobRecord:
        return self.store.get(job_id)

    def state(self, job_id: str):
        return self.get(job_id).state


@pytest.fixture
def make_queue(tmp_path):
    stores = []

    def make(gpu_count: int = 4) -> Queue:
        store = SqliteStore(tmp_path / f"gqa-{len(stores)}.db")
        stores.append(store)
        return Queue(store, gpu_count)

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def queue(make_queue) -> Queue:
    return make_queue(4)
