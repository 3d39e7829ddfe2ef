"""Dependencies, holds at submission and --begin through the services: what
is recorded at submission, what the supervisor starts and cancels, and what
`gqa queue` and `gqa status` say."""

import pytest

from gqa.models.errors import NotAdmitted, NotFound, SpecError
from gqa.models.job import JobState
from gqa.scheduling.dependencies import clock_time
from gqa.services.submit import HELD_AT_SUBMISSION
from tests.builders import spec
from tests.services.conftest import T0

S = JobState


def test_the_spec_s_options_are_recorded_on_each_job(queue):
    parent = queue.submit_one()
    tasks = queue.submit(after=f"afterany:{parent.id}", begin=T0 + 60, nice=5, array="0-1",
                         resources={"exclusive": True})

    for task in tasks:
        stored = queue.get(task.id)
        assert (stored.dependency, stored.begin, stored.nice, stored.exclusive, stored.user_hold) == (
            f"afterany:{parent.id}", T0 + 60, 5, True, False)


def test_a_chain_afterok_runs_in_order(queue):
    first = queue.submit_one(name="prep")
    second = queue.submit_one(name="train", after=f"afterok:{first.id}")

    assert [j.id for j in queue.supervisor.dispatch()] == [first.id]
    assert queue.supervisor.dispatch() == []
    [entry] = [e for e in queue.queries.queue().pending if e.job.id == second.id]
    assert entry.reason == f"waits for job {first.id} to succeed" and entry.eta is None
    assert queue.queries.jobs(second.id)[0].reason == f"waits for job {first.id} to succeed"

    queue.exit(first.id, 0)
    assert [j.id for j in queue.supervisor.dispatch()] == [second.id]


def test_a_failed_parent_ends_its_afterok_child_cancelled_once(queue):
    parent = queue.start()
    child = queue.submit_one(after=f"afterok:{parent.id}")
    other = queue.submit_one(after=f"afternotok:{parent.id}")
    queue.exit(parent.id, 3)
    queue.clock.advance(1)

    started = queue.supervisor.dispatch()

    cancelled = queue.get(child.id)
    assert (cancelled.state, cancelled.reason) == (
        S.CANCELLED, f"dependency can never be met: job {parent.id} failed (afterok)")
    assert cancelled.ended_at == queue.clock.now()
    assert [j.id for j in started] == [other.id]   # afternotok is met by the failure
    queue.supervisor.dispatch()
    assert [t.state for t in queue.get(child.id).history].count(S.CANCELLED) == 1


def test_a_held_child_whose_dependency_fails_is_cancelled_from_held(queue):
    """The cancel is guarded on the state the pass saw: HELD here, beside a QUEUED sibling."""
    parent = queue.start()
    held = queue.submit_one(after=f"afterok:{parent.id}", hold=True)
    queued = queue.submit_one(after=f"afterok:{parent.id}")
    queue.exit(parent.id, 3)
    queue.clock.advance(1)

    queue.supervisor.dispatch()

    for job in (held, queued):
        stored = queue.get(job.id)
        assert (stored.state, stored.reason) == (
            S.CANCELLED, f"dependency can never be met: job {parent.id} failed (afterok)")
    assert [t.state for t in queue.get(held.id).history][-2:] == [S.HELD, S.CANCELLED]


def test_a_dependency_on_a_job_that_does_not_exist_is_refused_and_nothing_is_written(queue):
    real = queue.submit_one()
    before = queue.store.state_counts()

    with pytest.raises(SpecError, match="job 99 does not exist"):
        queue.submit(after=f"afterok:{real.id}:99")
    with pytest.raises(SpecError, match=f"job {real.id}_4 does not exist"):
        queue.submit(after=f"afterany:{real.id}_4")
    assert queue.store.state_counts() == before


@pytest.mark.parametrize("dependency, exits, never", [
    ("afterok:{0}", [3], "dependency can never be met: job {0} failed (afterok)"),
    ("afternotok:{0}", [0], "dependency can never be met: job {0} succeeded (afternotok)"),
    ("afterok:{0},afterany:{1}", [3, None], "dependency can never be met: job {0} failed (afterok)"),
    ("afterok:{0}?afterok:{1}", [3, 3],
     "dependency can never be met: job {0} failed (afterok); job {1} failed (afterok)"),
    ("afterok:{0}?afterok:{1}", [3, None], None),      # the other may still succeed
    ("afternotok:{0}", [3], None),
    ("afterany:{0}", [3], None),
    ("afterok:{0}", [None], None),                     # running: it may still succeed
])
def test_a_dependency_that_can_never_be_met_is_told_at_submission_in_the_words_the_pass_cancels_it_with(
        queue, dependency, exits, never):
    # queued all the same, as sbatch queues it: a pipeline's driver script goes on
    parents = [queue.start() for _ in exits]
    for parent, code in zip(parents, exits):
        if code is not None:
            queue.exit(parent.id, code)
    ids = [p.id for p in parents]

    done = queue.submitter.record(spec(after=dependency.format(*ids)))

    [job] = done.jobs
    assert job.state == S.QUEUED
    if never is None:
        assert done.note is None
        return
    assert done.note == f"will be cancelled at the queue's next pass: {never.format(*ids)}"
    queue.supervisor.dispatch()
    assert (queue.state(job.id), queue.get(job.id).reason) == (S.CANCELLED, never.format(*ids))


def test_an_array_s_aftercorr_is_left_to_each_task(queue):
    """Task by task against its own counterpart: the pass cancels the task whose counterpart failed."""
    first = queue.submit(array="0-1")
    queue.supervisor.dispatch()
    queue.exit(first[0].id, 0)
    queue.exit(first[1].id, 3)

    second = queue.submit(array="0-1", after=f"aftercorr:{first[0].group}")

    assert [queue.state(j.id) for j in second] == [S.QUEUED, S.QUEUED]
    # one job: the whole array, as the pass reads it
    done = queue.submitter.record(spec(after=f"aftercorr:{first[0].group}"))
    assert (done.note or "").startswith(f"will be cancelled at the queue's next pass: dependency can never be "
                                        f"met: array {first[0].group}: of its 2 tasks")


def test_a_dependency_on_an_array_task_that_exists_is_taken(queue):
    tasks = queue.submit(array="0-2")
    job = queue.submit_one(after=f"afterok:{tasks[2].id}")
    assert queue.get(job.id).dependency == f"afterok:{tasks[2].id}"


def test_a_job_held_at_submission_waits_until_its_owner_releases_it(queue):
    job = queue.submit_one(hold=True)

    stored = queue.get(job.id)
    assert (stored.state, stored.user_hold, stored.reason) == (S.HELD, True, HELD_AT_SUBMISSION)
    assert queue.supervisor.dispatch() == []
    assert queue.get(job.id).state == S.HELD   # the budget's release never frees it
    assert queue.queries.jobs(job.id)[0].reason == f"held by its owner: gqa release {job.id}"

    queue.control.release([job.id])
    assert [j.id for j in queue.supervisor.dispatch()] == [job.id]


def test_a_begin_time_wakes_the_loop_and_the_job_starts_then(queue):
    job = queue.submit_one(begin=T0 + 600)

    assert queue.supervisor.dispatch() == []
    assert queue.supervisor.next_deadline() == T0 + 600
    assert queue.queries.jobs(job.id)[0].reason == f"waits until {clock_time(T0 + 600, T0)} (--begin)"
    queue.clock.advance(600)
    assert [j.id for j in queue.supervisor.dispatch()] == [job.id]


def test_a_singleton_waits_for_the_running_job_of_its_name(queue):
    first = queue.start(name="nightly")
    second = queue.submit_one(name="nightly", after="singleton")

    assert queue.supervisor.dispatch() == []
    assert queue.queries.jobs(second.id)[0].reason == (
        f"singleton: waits for job {first.id} (same name and owner) to end")
    queue.exit(first.id, 0)
    assert [j.id for j in queue.supervisor.dispatch()] == [second.id]


def test_a_held_job_appears_once_in_the_queue(queue):
    job = queue.submit_one(hold=True)
    assert [e.job.id for e in queue.queries.queue().pending] == [job.id]


def test_one_dispatch_follows_cancels_down_a_chain(queue):
    parent = queue.start()
    train = queue.submit_one(after=f"afterok:{parent.id}")
    evaluate = queue.submit_one(after=f"afterok:{train.id}")
    report = queue.submit_one(after=f"afterany:{evaluate.id}")
    queue.exit(parent.id, 1)

    started = queue.supervisor.dispatch()

    assert [queue.state(j.id) for j in (train, evaluate)] == [S.CANCELLED, S.CANCELLED]
    assert queue.get(evaluate.id).reason == f"dependency can never be met: job {train.id} was cancelled (afterok)"
    assert [j.id for j in started] == [report.id]


def test_a_held_submission_that_needed_approval_is_held_once_approved(queue):
    from dataclasses import replace

    queue.store.set_policy(replace(queue.store.policy(), approval_gpus=1))
    job = queue.submit_one(hold=True, resources={"gpus": 2})
    assert (queue.state(job.id), queue.get(job.id).user_hold) == (S.PENDING_APPROVAL, True)
    queue.control.approve([job.id])

    assert queue.supervisor.dispatch() == []

    held = queue.get(job.id)
    assert (held.state, held.reason) == (S.HELD, f"held by its owner: gqa release {job.id}")
    queue.control.release([job.id])
    assert [j.id for j in queue.supervisor.dispatch()] == [job.id]


def test_a_dependency_is_parsed_once_however_many_passes_read_it(queue, monkeypatch):
    from gqa.models import dependency

    first = queue.submit_one(name="step-0")
    chain = [first]
    for i in range(1, 20):
        chain.append(queue.submit_one(name=f"step-{i}", after=f"afterok:{chain[-1].id}"))
    dependency.parsed.cache_clear()
    parses: list[str] = []
    real = dependency.parse_dependency
    monkeypatch.setattr(dependency, "parse_dependency", lambda text: parses.append(text) or real(text))

    for _ in range(3):   # the first runs; the rest wait, each pass reading their 19 dependencies
        queue.supervisor.dispatch()
    assert sorted(parses) == sorted(j.dependency for j in chain[1:])   # once each, by the snapshot and the gate


# -- a job the history retention deleted ----------------------------------------------------------

DAY = 86_400.0


def _pruned(queue, *ids):
    """Retention's prune a day on; the ids must be gone."""
    from gqa.services.retention import Retention

    queue.supervisor.dispatch()   # a pass sees the ends first, as the daemon's turns do
    queue.clock.advance(2 * DAY)
    Retention(queue.store, queue.clock, DAY).prune()
    for job_id in ids:
        with pytest.raises(NotFound):
            queue.store.get(job_id)


def test_a_held_child_keeps_its_parent_past_the_retention_and_runs_once_released(queue):
    parent = queue.start()
    queue.exit(parent.id, 0)
    child = queue.submit_one(after=f"afterok:{parent.id}", hold=True)
    unrelated = queue.start()
    queue.exit(unrelated.id, 0)

    _pruned(queue, unrelated.id)
    queue.control.release([child.id])

    assert queue.get(parent.id).state == S.SUCCEEDED
    assert [j.id for j in queue.supervisor.dispatch()] == [child.id]


@pytest.mark.parametrize("kind, ends", [("afterok", S.CANCELLED), ("afternotok", S.CANCELLED),
                                        ("afterany", S.RUNNING), ("after", S.RUNNING)])
def test_a_child_whose_parent_s_record_is_gone_is_decided_not_left_waiting(queue, kind, ends, monkeypatch):
    """A parent deleted all the same (the child written as the prune read the dependencies, after
    submission checked its parent): how it ended is lost, but it ended."""
    parent = queue.start()
    queue.exit(parent.id, 3 if kind == "afternotok" else 0)   # met, until its record goes
    child = queue.submit_one(after=f"{kind}:{parent.id}", hold=True)
    monkeypatch.setattr(queue.store, "_depended_on", set)
    _pruned(queue, parent.id)
    queue.control.release([child.id])

    queue.supervisor.dispatch()

    stored = queue.get(child.id)
    assert stored.state == ends
    if ends == S.CANCELLED:
        assert stored.reason == (f"dependency can never be met: job {parent.id} ended past the history retention "
                                 f"and its record is gone, so how it ended is not known ({kind})")


def test_a_dependency_on_a_pruned_job_is_refused_saying_it_is_gone(queue):
    parent = queue.start()
    queue.exit(parent.id, 0)
    _pruned(queue, parent.id)
    before = queue.store.state_counts()

    with pytest.raises(SpecError, match=f"afterok:{parent.id}: job {parent.id} ended more than 1 day ago and "
                                        "its record is gone"):
        queue.submit_one(after=f"afterok:{parent.id}")
    with pytest.raises(SpecError, match="job 99 does not exist"):   # never handed out: as before
        queue.submit_one(after="afterok:99")
    assert queue.store.state_counts() == before


def test_a_pruned_job_is_looked_up_as_gone_not_awaiting_admission(queue):
    parent = queue.start()
    queue.exit(parent.id, 0)
    _pruned(queue, parent.id)

    gone = f"job {parent.id} ended more than 1 day ago and its record is gone"
    for read in (lambda: queue.queries.jobs(parent.id), lambda: queue.control.cancel([parent.id])):
        with pytest.raises(NotFound, match=gone) as caught:
            read()
        assert not isinstance(caught.value, NotAdmitted)


def test_aftercorr_starts_each_task_after_its_counterpart_and_cancels_one_whose_counterpart_failed(queue):
    first = queue.submit(array="0-2", resources={"gpus": 1})
    second = queue.submit(array="0-3", resources={"gpus": 1}, after=f"aftercorr:{first[0].group}")

    assert {j.id for j in queue.supervisor.dispatch()} == {j.id for j in first}
    queue.exit(first[0].id, 0)
    queue.exit(first[1].id, 1)
    assert [j.id for j in queue.supervisor.dispatch()] == [second[0].id]
    assert queue.state(second[1].id) == S.CANCELLED
    assert queue.get(second[1].id).reason == f"dependency can never be met: job {first[1].id} failed (aftercorr)"
    assert queue.queries.jobs(second[2].id)[0].reason == f"waits for job {first[2].id} to succeed"
    # task 3 has no counterpart: it waits for the whole of the first array, which has a failure
    queue.exit(first[2].id, 0)
    assert [j.id for j in queue.supervisor.dispatch()] == [second[2].id]
    assert queue.state(second[3].id) == S.CANCELLED


def test_an_after_delay_waits_its_minutes_past_the_start_and_wakes_the_loop_then(queue):
    parent = queue.start()
    queue.clock.advance(180)
    child = queue.submit_one(after=f"after:{parent.id}+10")

    assert queue.supervisor.dispatch() == []
    assert queue.queries.jobs(child.id)[0].reason == (
        f"waits for job {parent.id}, started 3m ago, + 10m: starts in 7m at the earliest")
    assert queue.supervisor.next_deadline() == T0 + 600
    queue.clock.advance(420)
    assert [j.id for j in queue.supervisor.dispatch()] == [child.id]
