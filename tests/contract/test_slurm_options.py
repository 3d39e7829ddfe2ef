"""Both stores keep Slurm's scheduling options of a job (dependency, user hold,
begin, nice, exclusive), hand them to the scheduler, and answer the states of
the jobs a dependency names (states_of)."""

from gqa.adapters.aws.dynamodb_store import DynamoDBStore
from gqa.models.job import JobState
from gqa.ports import Change
from gqa.services.snapshot import dependency_states
from tests.contract.jobs import T0, new_job, put

S = JobState
OPTIONS = {"after": "afterok:1,afterany:2_0", "hold": True, "begin": T0 + 600, "nice": 50}


def test_the_options_are_kept_and_read_back(store):
    [job] = store.create([new_job(spec={**OPTIONS, "name": "train step", "resources": {"exclusive": True}})])

    again = store.get(job.id)
    assert (again.dependency, again.user_hold, again.begin, again.nice, again.exclusive) == (
        "afterok:1,afterany:2_0", True, T0 + 600, 50, True)
    assert store.resolve(job.id, history=False)[0].dependency == "afterok:1,afterany:2_0"


def test_a_job_without_options_reads_back_without_them(store):
    [job] = store.create([new_job()])

    again = store.get(job.id)
    assert (again.dependency, again.user_hold, again.begin, again.nice, again.exclusive) == (
        None, False, None, 0, False)


def test_a_change_sets_and_clears_the_user_hold(store):
    [job] = store.create([new_job()])
    [held] = store.apply([Change(job.id, S.QUEUED, S.HELD, "held", T0, {"user_hold": True})])
    assert held.user_hold and store.get(job.id).user_hold
    store.apply([Change(job.id, S.HELD, S.QUEUED, "released", T0, {"user_hold": False})])
    assert not store.get(job.id).user_hold


def test_the_scheduler_sees_the_options_and_the_names(store):
    waiting = put(store, S.HELD, spec={**OPTIONS, "name": "eval", "resources": {"exclusive": True}},
                  fields={"user_hold": True})
    running = put(store, S.RUNNING, spec={"name": "prep", "resources": {"exclusive": True}},
                  fields={"assigned": (0,), "started_at": T0})

    pending, holding = store.scheduling_view()

    # on AWS a machine is an instance: Batch gives an exclusive job a whole one (batch_resources.py),
    # so the pass there is not told to wait for the whole cluster to empty
    one_machine = not isinstance(store, DynamoDBStore)
    [p] = pending
    assert (p.id, p.name, p.dependency, p.user_hold, p.begin, p.nice, p.exclusive, p.held) == (
        waiting.id, "eval", "afterok:1,afterany:2_0", True, T0 + 600, 50, one_machine, True)
    [r] = holding
    assert (r.id, r.name, r.exclusive) == (running.id, "prep", one_machine)


def test_states_of_names_a_job_a_task_and_a_whole_array(store):
    done = put(store, S.SUCCEEDED)
    failed = put(store, S.FAILED)
    tasks = store.create([new_job(array_index=i) for i in range(3)])
    store.apply([Change(tasks[0].id, S.QUEUED, S.STARTING, "claimed", T0)])
    store.apply([Change(tasks[1].id, S.QUEUED, S.CANCELLED, "cancelled", T0)])
    array = tasks[0].group

    states = store.states_of([done.id, failed.id, array, tasks[1].id, "999", f"{array}_9"])

    assert states == {done.id: {S.SUCCEEDED: 1}, failed.id: {S.FAILED: 1},
                      array: {S.STARTING: 1, S.CANCELLED: 1, S.QUEUED: 1}, tasks[1].id: {S.CANCELLED: 1}}
    assert store.states_of([]) == {}


def test_states_of_follows_a_job_to_its_end(store):
    job = put(store, S.RUNNING, fields={"assigned": (0,), "started_at": T0})
    assert store.states_of([job.id]) == {job.id: {S.RUNNING: 1}}
    store.apply([Change(job.id, S.RUNNING, S.SUCCEEDED, "done", T0 + 5, {"ended_at": T0 + 5})])
    assert store.states_of([job.id]) == {job.id: {S.SUCCEEDED: 1}}


def test_start_times_tell_when_an_after_delay_counts_from(store):
    ran = put(store, S.SUCCEEDED, fields={"started_at": T0 + 10, "ended_at": T0 + 50})
    dropped = put(store, S.CANCELLED, fields={"ended_at": T0 + 20})   # cancelled while it waited
    waiting = put(store, S.QUEUED)
    tasks = store.create([new_job(array_index=i) for i in range(2)])
    for task, start in zip(tasks, (T0 + 30, T0 + 40)):
        store.apply([Change(task.id, S.QUEUED, S.STARTING, "claimed", start)])
        store.apply([Change(task.id, S.STARTING, S.RUNNING, "started", start, {"started_at": start})])

    times = store.start_times([ran.id, dropped.id, waiting.id, tasks[0].group, tasks[0].id, "999"])

    assert times == {ran.id: (T0 + 10, True), dropped.id: (T0 + 20, False),
                     tasks[0].group: (T0 + 40, True), tasks[0].id: (T0 + 30, True)}
    assert store.start_times([]) == {}


def test_an_aftercorr_reads_for_each_task_the_task_of_its_index(store):
    first = store.create([new_job(array_index=i) for i in range(3)])
    store.apply([Change(first[1].id, S.QUEUED, S.CANCELLED, "cancelled", T0)])
    array = first[0].group
    store.create([new_job(array_index=i, dependency=f"aftercorr:{array}") for i in range(4)])
    pending, _ = store.scheduling_view()

    states = dependency_states(store, pending)

    assert states == {array: {S.QUEUED: 2, S.CANCELLED: 1}, f"{array}_0": {S.QUEUED: 1},
                      f"{array}_1": {S.CANCELLED: 1}, f"{array}_2": {S.QUEUED: 1}}   # none has a task 3
