"""The jobs a user names (`gqa status 12`, `gqa logs 12`), and the truth
about an id that was handed out but is not recorded yet.

On AWS the API reserves a submission's ids and answers at once; the admit
function records the jobs a moment later (usually within a second). An id in
that gap is neither unknown nor a job yet, and NotAdmitted says so. Only a
lookup that found nothing asks the store about its id counter: the usual
lookup costs what it did. On the local queue, which records a submission as
it hands out its ids, an id handed out with no job is one the history
retention deleted, and the lookup says so (`purged`)."""

from __future__ import annotations

from ..models.array_syntax import index_ranges
from ..models.errors import NotAdmitted, NotFound
from ..models.job import JobRecord, group_of
from ..models.units import format_duration
from ..ports import JobRecords
from ..scheduling.dependencies import GONE


def resolve(store: JobRecords, ref: str, *, history: bool = True) -> list[JobRecord]:
    """store.resolve(ref, history=history); NotAdmitted where it finds nothing but ref's id was
    reserved; else NotFound saying what there is (not_found)."""
    try:
        return store.resolve(ref, history=history)
    except NotFound as exc:
        if store.purged(group_of(ref)) is not None or not awaiting_admission(store, ref):
            raise not_found(store, ref, exc) from None
    raise NotAdmitted(f"job {ref} was accepted and is waiting for admission (a submission's jobs are recorded "
                      "a moment after it is accepted, usually within a second); try again in a moment. If this "
                      "persists, the submission was not admitted: check the admit function's logs and its "
                      "intake dead-letter queue")


def purged(store: JobRecords, ref: str) -> str | None:
    """Why ref, found nowhere in the store, names nothing, where the history retention deleted its
    job: "job 1 ended more than 1 day ago and its record is gone (...)"; else None."""
    kept = store.purged(group_of(ref))
    if kept is None:
        return None
    if kept <= 0:
        return f"job {ref} {GONE} (gqa local start --keep-history)"
    days = kept / 86_400
    span = (f"{days:g} day" + ("" if days == 1 else "s")) if days == int(days) else format_duration(kept)
    return (f"job {ref} ended more than {span} ago and its record is gone (the queue keeps finished jobs "
            f"{span}: gqa local start --keep-history)")


def awaiting_admission(store: JobRecords, ref: str) -> bool:
    """Whether ref, found nowhere in the store, names an id reserve_ids handed out."""
    group = group_of(ref)
    if not store.reserved(group):
        return False
    if group == ref:
        return True
    # an array's task: a submission is recorded whole, so if its group has
    # jobs this task never existed ("12_7" of a 5-task array, "12_0" of a single job);
    # a large array admitted in chunks is the exception, which QueryService.jobs
    # tells from the array's admission progress
    try:
        store.resolve(group)
    except NotFound:
        return True
    return False


def not_found(store: JobRecords, ref: str, error: NotFound) -> NotFound:
    """Why an array task's id (Slurm's GROUP_INDEX, `34_7`) names nothing,
    when its group exists: the index is out of range (the tasks there are
    are listed), not a number, or the group is a single job. Else `error`.
    Asked only once a lookup failed: the usual one costs what it did. A job
    the history retention deleted: that it is gone (purged)."""
    gone = purged(store, ref)
    if gone is not None:
        return NotFound(gone)
    group, _, index = ref.partition("_")
    if not index:
        return error
    try:
        jobs = store.resolve(group, history=False)
    except NotFound:
        return error
    if len(jobs) == 1 and jobs[0].array_index is None:
        return NotFound(f"job {group} is a single job, not an array; name it {group}")
    indices = [j.array_index for j in jobs if j.array_index is not None]
    if not index.isdigit():
        return NotFound(f"{ref} is not a task of array {group}: a task is GROUP_INDEX, e.g. {group}_{indices[0]}")
    tasks = f"its {len(indices)} tasks are" if len(indices) != 1 else "its only task is"
    return NotFound(f"array {group} has no task {index}: {tasks} {index_ranges(indices)}")
