"""The JobRecords contract for a read-modify-write: a change that names the
values it was planned from (`Change.unchanged`) applies only while the job
still holds them, whichever connection wrote since, in apply() and
apply_each() alike; the state guard alone would let it overwrite them."""

import pytest

from gqa.models.errors import Conflict
from gqa.ports import Change
from tests.builders import spec
from tests.contract.jobs import S, T0, new_job

TWO_GPUS, ONE_GPU = spec(resources={"gpus": 2}), spec(resources={"gpus": 1})


def _respecced(job_id: str, read: str, to) -> Change:
    """An update's write: the new spec and its column, guarded on the spec it was made from."""
    fields = {"spec_json": to.model_dump_json(), "gpus": to.resources.gpus, "tier": to.priority.rank,
              "wall_time": to.limits.wall_time}
    return Change(job_id, S.QUEUED, None, "", T0 + 1, fields, unchanged={"spec_json": read})


@pytest.fixture
def queued(store):
    store.create([new_job(spec=TWO_GPUS), new_job(spec=TWO_GPUS)])
    return store


def test_a_change_applies_while_the_job_holds_what_it_read(queued, open_store):
    read = queued.get("1").spec_json
    [job] = queued.apply([_respecced("1", read, ONE_GPU)])
    assert (job.gpus, open_store().get("1").gpus) == (1, 1)


def test_a_change_read_before_another_write_is_refused_and_writes_nothing(queued, open_store):
    read = queued.get("1").spec_json                     # read (and, on DynamoDB, remembered)
    open_store().apply([_respecced("1", read, spec(resources={"gpus": 2}, limits={"wall_time": "7h"}))])

    with pytest.raises(Conflict):
        queued.apply([_respecced("1", read, ONE_GPU)])

    stored = open_store().get("1")
    assert (stored.gpus, stored.wall_time) == (2, 7 * 3600)


def test_apply_each_skips_a_change_read_before_another_write(queued, open_store):
    read = queued.get("1").spec_json
    open_store().apply([_respecced("2", read, spec(resources={"gpus": 2}, priority="high"))])

    assert queued.apply_each([_respecced("1", read, ONE_GPU), _respecced("2", read, ONE_GPU)]) == [True, False]

    other = open_store()
    assert [(j.gpus, j.tier) for j in (other.get("1"), other.get("2"))] == [(1, 1), (2, 0)]


def test_a_claim_guarded_on_the_gpus_the_pass_read_is_refused_after_an_update(queued, open_store):
    """What the scheduling pass's claim can check: the GPU count it assigned for is still the job's."""
    open_store().apply([_respecced("1", queued.get("1").spec_json, ONE_GPU)])     # lands after the pass read 2
    claim = Change("1", S.QUEUED, S.STARTING, "assigned GPUs 0,1", T0 + 2, {"assigned": (0, 1)},
                   unchanged={"gpus": 2})

    with pytest.raises(Conflict):
        queued.apply([claim])
    assert queued.apply_each([claim]) == [False]

    stored = open_store().get("1")
    assert (stored.state, stored.gpus, stored.assigned) == (S.QUEUED, 1, ())
