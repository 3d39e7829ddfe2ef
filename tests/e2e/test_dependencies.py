"""Dependencies and holds with a real daemon and real processes: a three-step
pipeline runs in order, a failed step ends its afterok successor cancelled,
and a held job waits until its owner releases it."""

import sys

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
PY = sys.executable
# appends "<step> start" and "<step> end" to the pipeline's journal, then exits with the given code
STEP = ("import sys, time\n"
        "step, journal, code = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
        "open(journal, 'a').write(f'{step} start\\n')\n"
        "time.sleep(0.3)\n"
        "open(journal, 'a').write(f'{step} end\\n')\n"
        "sys.exit(code)\n")


def step(queue, name: str, code: int = 0, **spec) -> str:
    [job_id] = queue.submit([PY, "-c", STEP, name, str(queue.home / "journal"), str(code)], name=name, **spec)
    return job_id


def test_a_three_step_pipeline_runs_in_order(queue):
    prep = step(queue, "preprocess")
    train = step(queue, "train", after=f"afterok:{prep}")
    report = step(queue, "report", after=f"afterany:{train}")

    jobs = queue.wait([prep, train, report], timeout=30)

    assert [j.state.value for j in jobs] == ["SUCCEEDED"] * 3
    assert (queue.home / "journal").read_text().split("\n")[:-1] == [
        "preprocess start", "preprocess end", "train start", "train end", "report start", "report end"]


def test_a_failed_step_cancels_its_afterok_successor_and_runs_its_afterany_one(queue):
    prep = step(queue, "preprocess", code=3)
    train = step(queue, "train", after=f"afterok:{prep}")
    cleanup = step(queue, "cleanup", after=f"afterany:{train}")

    # at once, not at the daemon's next idle check (30 s): the cancel is followed in the same turn
    failed, cancelled, cleaned = queue.wait([prep, train, cleanup], timeout=15)

    assert (failed.state.value, cleaned.state.value) == ("FAILED", "SUCCEEDED")
    assert (cancelled.state.value, cancelled.reason) == (
        "CANCELLED", f"dependency can never be met: job {prep} failed (afterok)")
    assert "train start" not in (queue.home / "journal").read_text()


def test_a_held_job_waits_until_its_owner_releases_it(queue):
    held = step(queue, "held", hold=True)
    other = step(queue, "other")
    queue.wait(other, timeout=20)

    assert queue.job(held).state.value == "HELD"
    assert queue.backend.queries().jobs(held)[0].reason == f"held by its owner: gqa release {held}"
    queue.cli("release", held, check=True)
    assert queue.wait(held, timeout=20).state.value == "SUCCEEDED"


def test_a_job_with_a_begin_time_starts_at_that_time_not_before(queue):
    import time

    begin = time.time() + 2.0
    job_id = step(queue, "later", begin=begin)

    job = queue.wait(job_id, timeout=20)

    assert job.state.value == "SUCCEEDED"
    assert begin <= job.started_at < begin + 1.5   # the daemon woke for it, not at its next idle check
