"""with_changes and rebuilt_with: dataclasses.replace for frozen records (the scheduler's and the
store's), cheaper, and equal to it (one copies through __dict__, for a record read once; the other
through __init__, for a record kept and read pass after pass)."""

import dataclasses

import pytest

from gqa.models.job import JobRecord, JobState
from gqa.models.records import rebuilt_with, with_changes
from tests.builders import job_record, pending, running

COPIES = [with_changes, rebuilt_with]


@pytest.mark.parametrize("copy_of", COPIES)
@pytest.mark.parametrize("record, changes", [
    (pending("a", gpus=2, wall_time=3600.0, nice=5), {"expected_runtime": 1800.0}),
    (pending("a", gpu_types=("a10g", "l4"), spot=True), {"reclaims": 2, "served": 7200.0, "held": True}),
    (pending("a"), {}),
    (running("r", gpus=(0, 1), wall_time=600.0), {"checkpointed_at": 120.0}),
    (running("r", started=False), {"started_at": 50.0, "expected_runtime": 300.0}),
])
def test_a_copy_with_changes_equals_dataclasses_replace_and_leaves_the_record_as_it_was(copy_of, record, changes):
    before = dataclasses.replace(record)
    copy = copy_of(record, **changes)
    assert copy == dataclasses.replace(record, **changes)
    assert type(copy) is type(record)
    assert hash(copy) == hash(dataclasses.replace(record, **changes))
    assert record == before
    assert copy is not record


@pytest.mark.parametrize("copy_of", COPIES)
@pytest.mark.parametrize("record", [pending("a"), running("r")])
def test_a_field_the_record_lacks_is_refused_by_name(copy_of, record):
    with pytest.raises(TypeError, match="has no field 'gpu_count'"):
        copy_of(record, gpu_count=2)


@pytest.mark.parametrize("copy_of", COPIES)
def test_a_record_whose_init_does_not_take_every_field_in_order_is_refused(copy_of):
    @dataclasses.dataclass(frozen=True)
    class Keyworded:
        a: int
        b: int = dataclasses.field(default=0, kw_only=True)

    with pytest.raises(TypeError, match="not a plain record"):
        copy_of(Keyworded(1, b=2), a=3)


@pytest.mark.parametrize("copy_of", COPIES)
@pytest.mark.parametrize("values", [
    {"id": "12_3", "group": "12", "seq": 40},
    {"state": JobState.CANCELLED, "reason": "cancelled by user", "ended_at": 9.0, "not_before": None},
    {"history": ()},
    {"spec_json": '{"command": ["python", "other.py"]}'},
])
def test_a_job_record_copy_keeps_nothing_cached_of_the_old_record(copy_of, values):
    """A job record caches its parsed spec; the copy parses its own, as replace's would."""
    job = job_record(id="1", state=JobState.QUEUED, spec={"command": ["python", "train.py"]})
    assert job.spec.command == ["python", "train.py"]      # parsed and cached on the old record
    new = copy_of(job, **values)
    assert new == dataclasses.replace(job, **values) and type(new) is JobRecord
    assert new.spec == dataclasses.replace(job, **values).spec
    assert job == job_record(id="1", state=JobState.QUEUED, spec={"command": ["python", "train.py"]})


def test_a_record_of_one_field_is_rebuilt():
    @dataclasses.dataclass(frozen=True)
    class One:
        a: int

    assert rebuilt_with(One(1), a=2) == with_changes(One(1), a=2) == One(2)
    assert rebuilt_with(One(1)) == One(1)
