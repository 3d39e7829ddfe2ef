"""state_counts: how many jobs in each state, what `gqa local status` shows,
asked of the port instead of any backend's database."""

from gqa.models.job import JobState
from gqa.ports import Change
from tests.contract.jobs import new_job, put

S = JobState


def test_an_empty_store_counts_nothing(store):
    assert store.state_counts() == {}


def test_each_state_is_counted_and_empty_ones_left_out(store):
    store.create([new_job(array_index=i) for i in range(3)])
    put(store, S.RUNNING)
    put(store, S.RUNNING)
    put(store, S.FAILED)
    assert store.state_counts() == {S.QUEUED: 3, S.RUNNING: 2, S.FAILED: 1}


def test_a_change_moves_a_job_between_counts(store):
    job = put(store, S.QUEUED)
    put(store, S.CANCELLED)
    store.apply([Change(job.id, S.QUEUED, S.HELD, "held", 2_000.0)])
    assert store.state_counts() == {S.HELD: 1, S.CANCELLED: 1}
