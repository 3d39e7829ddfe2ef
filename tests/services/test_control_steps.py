"""ControlService.step: a change to a large array a bounded step at a time,
each step going on where the last stopped, paced, and every job changed once
whatever step is repeated."""

from collections import Counter

import pytest

from gqa.models.errors import InvalidTransition, NotPermitted
from gqa.models.job import JobState, Request
from gqa.ports import Change
from gqa.services.control import SLICE, ControlService, Position
from tests.services.conftest import T0

S = JobState


class Paged:
    """The queue's store read a page at a time, in the order of the jobs' ids (as DynamoDB's Query)."""

    def __init__(self, store):
        self.store, self.reads = store, []

    def group_page(self, ref, after, limit):
        jobs = sorted(self.store.resolve(ref, history=False), key=lambda j: j.id)
        self.reads.append(limit)
        return [j for j in jobs if after is None or j.id > after][:limit]


class Paced:
    """Admissions' pacing: `tasks` a step, each slice advancing the clock `per_slice` seconds."""

    def __init__(self, clock, tasks, per_slice=1.0):
        self.clock, self.tasks, self.per_slice = clock, tasks, per_slice
        self.decided = []

    def chunk(self, job, seconds=None):
        return self.tasks

    def pace(self, jobs):
        for n, start in enumerate(range(0, len(jobs), SLICE)):
            if n:
                self.clock.advance(self.per_slice)
            yield jobs[start:start + SLICE]

    def decide(self, group, expect, to):
        self.decided.append((group, to.state))
        return False


def service(queue, tasks=300, per_slice=1.0):
    paced = Paced(queue.clock, tasks, per_slice)
    return ControlService(queue.store, queue.clock, queue.waker, paced), Paged(queue.store), paced


def test_a_step_does_what_its_time_holds_and_the_next_goes_on_from_there(queue):
    [first, *_] = queue.submit(array="0-999")
    control, pages, paced = service(queue, tasks=300)
    done, after, calls = [], None, 0
    while True:
        step = control.step("cancel", [first.group], pages, until=queue.clock.now() + 100, after=after)
        calls += 1
        assert len(step.results) <= 300                   # the work of one step's time, and no more
        done += step.results
        if step.next is None:
            break
        after = step.next
    assert calls == 4 and Counter(r.action for r in done) == {"cancelled": 1000}
    assert len({r.job.id for r in done}) == 1000
    assert {j.state for j in queue.store.resolve(first.group)} == {S.CANCELLED}
    assert set(pages.reads) <= {1, SLICE}                 # read a slice at a time, just before it is written
    assert paced.decided == [(first.group, S.CANCELLED)]  # the tasks not admitted yet: decided once, at the start


def test_a_step_stops_at_its_deadline_after_one_slice_at_least(queue):
    [first, *_] = queue.submit(array="0-499")
    control, pages, _ = service(queue, tasks=500, per_slice=10.0)
    step = control.step("hold", [first.group], pages, until=queue.clock.now() + 15)
    assert len(step.results) == 2 * SLICE and step.next == Position(0, step.results[-1].job.id)
    late = control.step("hold", [first.group], pages, until=queue.clock.now() - 1, after=step.next)
    assert len(late.results) == SLICE                     # past its time already: one slice, so it moves on


def test_a_repeated_or_interrupted_step_changes_nothing_twice(queue):
    [first, *_] = queue.submit(array="0-249")
    control, pages, _ = service(queue, tasks=SLICE)
    one = control.step("cancel", [first.group], pages, until=T0 + 100)
    again = control.step("cancel", [first.group], pages, until=T0 + 100)     # its answer lost: asked again
    assert [r.action for r in again.results] == ["unchanged"] * SLICE and again.next == one.next
    rest, after = [], one.next
    while after is not None:
        step = control.step("cancel", [first.group], pages, until=T0 + 100, after=after)
        rest += step.results
        after = step.next
    assert Counter(r.action for r in rest) == {"cancelled": 150}
    assert all(sum(t.state == S.CANCELLED for t in j.history) == 1 for j in queue.store.resolve(first.group))


def test_several_refs_go_on_from_one_to_the_next_and_a_job_named_twice_is_changed_once(queue):
    [a, *_] = queue.submit(array="0-149")
    single = queue.submit_one()
    control, pages, _ = service(queue, tasks=2 * SLICE)
    refs, done, after = [a.group, single.id, f"{a.group}_7"], [], None
    while True:
        step = control.step("cancel", refs, pages, until=T0 + 100, after=after)
        done += step.results
        if step.next is None:
            break
        after = step.next
    assert Counter(r.action for r in done) == {"cancelled": 151, "unchanged": 1}
    assert queue.state(single.id) == S.CANCELLED


def test_the_first_step_checks_every_ref_before_anything_changes(queue):
    running = queue.start()
    [a, *_] = queue.submit(array="0-149")
    control, pages, _ = service(queue)
    with pytest.raises(InvalidTransition, match="only a pending job can be held"):
        control.step("hold", [a.group, running.id], pages, until=T0 + 100)
    assert {j.state for j in queue.store.resolve(a.group)} == {S.QUEUED}

    def refuse(jobs):
        if any(j.id == running.id for j in jobs):
            raise NotPermitted("not yours")
    with pytest.raises(NotPermitted):
        control.step("cancel", [a.group, running.id], pages, until=T0 + 100, allow=refuse)
    assert {j.state for j in queue.store.resolve(a.group)} == {S.QUEUED}


def test_requeue_in_steps_asks_the_running_tasks_only(queue):
    [a, *_] = queue.submit(array="0-3")
    queue.supervisor.dispatch()
    queue.store.apply([Change(f"{a.group}_3", S.RUNNING, None, "", T0, {"request": Request.CANCEL})])
    control, pages, _ = service(queue)
    step = control.step("requeue", [a.group], pages, until=T0 + 100)
    assert step.next is None
    assert Counter((r.action, r.detail) for r in step.results)[("unchanged", "being cancelled")] == 1
    requeued = [r.job.id for r in step.results if r.action == "requeueing"]
    assert requeued and all(queue.get(i).request == Request.REQUEUE for i in requeued)
