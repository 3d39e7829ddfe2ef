"""Hold, release and update through ControlService on every store: what
they write is what another connection reads, records and the scheduling
view alike (on DynamoDB the pass reads a projection of the item)."""

import pytest

from gqa.adapters.clock import SystemClock
from gqa.models.errors import InvalidTransition
from gqa.ports import Change, Inventory
from gqa.scheduling.snapshot import Gpu
from gqa.services.control import ControlService
from tests.builders import spec
from tests.contract.jobs import S, T0, new_job
from tests.services.test_control import StaleReads


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


def test_two_updates_of_one_job_made_at_once_both_land(store, open_store, control):
    """`gqa update J --time 7h & gqa update J --gpus 0`: the one written second was read before the
    first landed; it reads the job again and applies its own change to the spec as it now is."""
    store.create([new_job(spec=spec(resources={"gpus": 2}, limits={"wall_time": "4h"}))])
    seen = store.resolve("1", history=False)                     # read before the other update lands
    [first] = ControlService(open_store(), SystemClock()).update("1", gpus=0)

    [second] = ControlService(StaleReads(store, seen), SystemClock()).update("1", time=7 * 3600)

    assert (first.action, second.action) == ("updated", "updated")
    assert second.detail == "wall time 4h00m -> 7h00m"
    stored = open_store().get("1")
    assert (stored.gpus, stored.wall_time) == (0, 7 * 3600)
    assert (stored.spec.resources.gpus, stored.spec.limits.wall_time) == (0, 7 * 3600)


def test_an_update_read_before_the_pass_claimed_the_job_is_refused_as_starting(store, open_store, control):
    store.create([new_job(spec=spec(resources={"gpus": 2}))])
    seen = store.resolve("1", history=False)
    open_store().apply([Change("1", S.QUEUED, S.STARTING, "assigned GPUs 0,1", T0, {"assigned": (0, 1)})])

    with pytest.raises(InvalidTransition, match="job 1 is starting; only a pending job can be updated"):
        ControlService(StaleReads(store, seen), SystemClock()).update("1", gpus=1)

    stored = open_store().get("1")
    assert (stored.state, stored.gpus, stored.assigned, stored.spec.resources.gpus) == (S.STARTING, 2, (0, 1), 2)


def test_an_array_update_read_before_another_applies_both_to_every_task(store, open_store, control):
    store.create([new_job(array_index=i, spec=spec(limits={"wall_time": "4h"})) for i in range(3)])
    seen = store.resolve("1", history=False)
    ControlService(open_store(), SystemClock()).update("1_1", priority="high")

    results = ControlService(StaleReads(store, seen), SystemClock()).update("1", time=3600)

    assert [r.action for r in results] == ["updated"] * 3
    assert [(j.wall_time, j.tier) for j in open_store().resolve("1")] == [(3600, 1), (3600, 0), (3600, 1)]
