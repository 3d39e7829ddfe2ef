"""`gqa queue`, `gqa top` and the web page list the queue as one state of the store held it: while
short jobs start and end between the view's reads, the positions run 1..N over the pending rows
shown, and the GPUs in use are those the running rows shown hold."""

from collections.abc import Callable
from typing import Any, cast

import pytest

from gqa.models.job import JobState
from gqa.ports import JobStore
from gqa.services.overview import OverviewService
from gqa.services.queries import QueryService

# the reads that list live jobs: the change is made once the first of them has answered
LIVE_READS = frozenset({"queue_listing", "scheduling_view", "list"})


class ChangedAfterFirstRead:
    """The store, with `change` made (by the daemon, as it were) right after its first read of the
    live jobs: what a drain of short jobs does between the reads of one view."""

    def __init__(self, store: JobStore, change: Callable[[], None]):
        self._store, self._change = store, change
        self.changed = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if name not in LIVE_READS or self.changed:
            return method

        def read(*args: Any, **kwargs: Any) -> Any:
            answer = method(*args, **kwargs)
            if not self.changed:
                self.changed = True
                self._change()
            return answer
        return read


def one_ends(queue) -> Callable[[], None]:
    """The first running job ends; nothing starts in its place yet."""
    first = min(queue.store.list([JobState.RUNNING]), key=lambda j: j.seq)
    return lambda: queue.exit(first.id, 0)


def one_ends_the_next_starts(queue) -> Callable[[], None]:
    ends = one_ends(queue)

    def change() -> None:
        ends()
        queue.supervisor.dispatch()
    return change


@pytest.fixture
def draining(make_queue):
    """4 GPUs busy with one-GPU jobs, 3 more waiting."""
    queue = make_queue(4)
    for _ in range(7):
        queue.submit_one()
    assert len(queue.supervisor.dispatch()) == 4
    queue.clock.advance(5)
    return queue


def in_use(running) -> int:
    return sum(len(j.assigned) for j in running)


@pytest.mark.parametrize("change", [one_ends, one_ends_the_next_starts])
def test_the_queue_view_is_one_state_of_the_store(draining, change):
    store = ChangedAfterFirstRead(draining.store, change(draining))

    view = QueryService(cast(JobStore, store), draining.clock).queue()

    assert store.changed
    placed = [e.position for e in view.pending if e.position is not None]
    assert placed == list(range(1, len(placed) + 1))
    assert view.total_gpus - view.free_gpus == in_use(view.running)
    free = view.free_gpus
    waiting = {e.reason for e in view.pending}
    assert waiting <= {"starting now", f"needs 1 GPU, {free} free"}, waiting


@pytest.mark.parametrize("change", [one_ends, one_ends_the_next_starts])
def test_the_overview_is_one_state_of_the_store(draining, change):
    store = ChangedAfterFirstRead(draining.store, change(draining))

    view = OverviewService(cast(JobStore, store), draining.store, draining.clock).overview()

    assert store.changed
    placed = [e.position for e in view.head if e.position is not None]
    assert placed == list(range(1, len(placed) + 1))
    assert view.pending == len(view.head)
    held = {i for job in view.running for i in job.gpus}
    assert len(view.gpus) - view.free_gpus == len(held)
    # the teams' GPUs are those of the jobs the frame shows
    assert sum(t.gpus_held for t in view.teams) == len(held)
