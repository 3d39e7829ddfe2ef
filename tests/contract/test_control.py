"""Hold, release and update through ControlService on every store: what
they write is what another connection reads, records and the scheduling
view alike (on DynamoDB the pass reads a projection of the item)."""

import pytest

from gqa.adapters.clock import SystemClock
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu
from gqa.services.control import ControlService
from tests.builders import spec
from tests.contract.jobs import S, new_job


@pytest.fixture
def control(store):
    store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(4))))
    return ControlService(store, SystemClock())


def test_a_hold_and_a_release_are_read_by_another_connection(store, open_store, control):
    store.create([new_job(array_index=i) for i in range(3)])
    other = open_store()

    assert [r.action for r in control.hold(["1"])] == ["held"] * 3
    assert {(j.state, j.user_hold) for j in other.resolve("1")} == {(S.HELD, True)}
    assert {p.id for p in other.scheduling_view()[0] if p.held} == {"1_0", "1_1", "1_2"}

    assert [r.action for r in control.release(["1_1"])] == ["released"]
    assert [(j.state, j.user_hold) for j in other.resolve("1")] == [(S.HELD, True), (S.QUEUED, False), (S.HELD, True)]
    assert [r.action for r in control.hold(["1"])] == ["unchanged", "held", "unchanged"]


def test_an_update_writes_the_spec_and_the_columns_the_pass_reads(store, open_store, control):
    job_spec = spec(resources={"gpus": 2}, limits={"wall_time": "4h"})
    store.create([new_job(spec=job_spec)])
    other = open_store()

    [result] = control.update("1", time=3600, priority="high", gpus=1)

    assert result.action == "updated"
    stored = other.get("1")
    assert (stored.gpus, stored.tier, stored.wall_time) == (1, 0, 3600)
    assert (stored.spec.resources.gpus, stored.spec.priority.value, stored.spec.limits.wall_time) == (1, "high", 3600)
    [pending] = other.scheduling_view()[0]
    assert (pending.id, pending.gpus, pending.tier, pending.wall_time) == ("1", 1, 0, 3600)
