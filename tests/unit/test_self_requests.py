"""A job that requeues or cancels itself from inside (`scontrol requeue
$SLURM_JOB_ID`, `scancel $SLURM_JOB_ID`): the exit rules' rows for what the
backend reports (ExitKind.SELF_REQUEUE, SELF_CANCEL), and the request file
the job's tools leave and the queue reads (gqa.runtime.job_files)."""

import os
import signal
import threading

import pytest

from gqa.models.job import JobState, Request
from gqa.models.outcome import TIMEOUT, ExitKind, decide
from gqa.runtime import job_files
from gqa.runtime.slurm_tools import STEP_STATUS_ENV
from tests.builders import job_record

NOW = 5000.0
S = JobState
REQUEUE, CANCEL = ExitKind.SELF_REQUEUE, ExitKind.SELF_CANCEL
REQUEUED = "requeued itself (scontrol requeue $SLURM_JOB_ID); resumes from its last checkpoint"
CANCELLED = "cancelled itself (scancel $SLURM_JOB_ID)"


def job(*, requeue: bool = True, on_error: int = 2, **fields):
    spec = {"requeue": requeue, "limits": {"wall_time": "1h"}, "retries": {"on_error": on_error}}
    fields.setdefault("started_at", NOW - 60)
    return job_record(spec=spec, state=S.RUNNING, pid=4242, assigned=(0,), attempts=1, **fields)


# (the job, how it ended) -> (state, reason)
CASES = [
    pytest.param({}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID", code=143),
                 (S.RETRY_WAIT, REQUEUED), id="requeue: ended by its own SIGTERM"),
    pytest.param({}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID", sig=signal.SIGTERM),
                 (S.RETRY_WAIT, REQUEUED), id="requeue: killed by its own SIGTERM"),
    pytest.param({}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID", code=0),
                 (S.RETRY_WAIT, REQUEUED), id="requeue: exit 0 before the stop came still requeues"),
    pytest.param({}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID"),
                 (S.RETRY_WAIT, REQUEUED), id="requeue: no status, read by a restarted daemon"),
    pytest.param({"on_error": 0}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID", code=1),
                 (S.RETRY_WAIT, REQUEUED), id="requeue: not an error, whatever the retries left"),
    pytest.param({"requeue": False}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID", code=143),
                 (S.FAILED, "it asked to be requeued (scontrol requeue); --no-requeue"),
                 id="requeue of a --no-requeue job is not obeyed"),
    pytest.param({}, dict(kind=CANCEL, detail="scancel $SLURM_JOB_ID", code=143),
                 (S.CANCELLED, CANCELLED), id="cancel: ended by its own SIGTERM"),
    pytest.param({}, dict(kind=CANCEL, detail="scancel $SLURM_JOB_ID", code=0),
                 (S.CANCELLED, CANCELLED), id="cancel: exit 0 before the stop came"),
    pytest.param({"requeue": False}, dict(kind=CANCEL, detail="scancel $SLURM_JOB_ID", sig=signal.SIGTERM),
                 (S.CANCELLED, CANCELLED), id="cancel: --no-requeue changes nothing"),
    # what gqa was carrying out still wins
    pytest.param({"request": Request.CANCEL}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID", code=143),
                 (S.CANCELLED, f"cancelled by user (its attempt had ended: {REQUEUED})"),
                 id="a user's cancel not yet carried out wins over a requeue"),
    pytest.param({"kill_reason": TIMEOUT}, dict(kind=REQUEUE, detail="scontrol requeue $SLURM_JOB_ID", code=143),
                 (S.TIMED_OUT, "exceeded its wall time of 1h00m"),
                 id="stopped at its wall time: it timed out"),
]


@pytest.mark.parametrize("fields, ended, verdict", CASES)
def test_a_job_that_ends_itself_ends_as_it_asked(fields, ended, verdict):
    outcome = decide(job(**fields), now=NOW, draw=0.5, **{"code": None, "sig": None, **ended})
    assert (outcome.to, outcome.reason) == verdict


def test_a_self_requeue_is_an_interruption_from_the_checkpoint_not_an_error():
    outcome = decide(job(error_retries=1, interruptions=2), code=143, sig=None, now=NOW, draw=0.5, kind=REQUEUE)
    assert outcome.fields["interruptions"] == 3 and outcome.fields["not_before"] == NOW
    assert "error_retries" not in outcome.fields and outcome.fields["ended_at"] is None


@pytest.mark.parametrize("ran, wait, said", [
    (60, 0, REQUEUED),                   # a minute or more in: back at once
    (3600, 0, REQUEUED),
    (59.5, 0, REQUEUED),                 # under a second to wait is not worth a word
    (2, 58, "requeued itself (scontrol requeue $SLURM_JOB_ID) after 2s; starts again in 58s at the earliest: a "
            "job that requeues itself starts at most once every 1m00s; resumes from its last checkpoint"),
    (0, 60, None),
])
def test_a_job_that_requeues_itself_starts_at_most_once_a_minute(ran, wait, said):
    """A script that requeues itself at once (a trap on EXIT) restarted ten times a second."""
    outcome = decide(job(started_at=NOW - ran), code=143, sig=None, now=NOW, draw=0.5, kind=REQUEUE,
                     detail="scontrol requeue $SLURM_JOB_ID")
    assert outcome.to == S.RETRY_WAIT
    assert outcome.fields["not_before"] == (NOW + wait if wait else NOW)
    if said is not None:
        assert outcome.reason == said


def test_a_self_cancel_ends_the_job():
    outcome = decide(job(), code=143, sig=None, now=NOW, draw=0.5, kind=CANCEL)
    assert outcome.fields["ended_at"] == NOW and "interruptions" not in outcome.fields


# -- the request file ---------------------------------------------------------------------------------------
def env_of(folder):
    return {STEP_STATUS_ENV: str(folder / "steps")}


@pytest.mark.parametrize("asked, read", [
    ([], None),
    (["requeue"], "requeue"),
    (["cancel"], "cancel"),
    (["requeue", "requeue"], "requeue"),
    (["requeue", "cancel"], "cancel"),
    (["cancel", "requeue"], "cancel"),
])
def test_the_request_read_is_the_strongest_word_asked(tmp_path, asked, read):
    for word in asked:
        job_files.ask(tmp_path, word)
    assert job_files.asked(tmp_path) == read
    lines = (tmp_path / job_files.REQUEST).read_text().splitlines() if asked else []
    assert sorted(lines) == sorted(set(asked))      # a word asked again is not written again


def test_requests_asked_at_once_leave_whole_lines(tmp_path):
    threads = [threading.Thread(target=job_files.ask, args=(tmp_path, w)) for w in ("requeue", "cancel") * 8]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set((tmp_path / job_files.REQUEST).read_text().splitlines()) == {"requeue", "cancel"}
    assert job_files.asked(tmp_path) == "cancel"


@pytest.mark.parametrize("text", ["", "please requeue me\n", "REQUEUE\n", "requeue" * 1000, "\0\xff"])
def test_anything_but_the_words_is_no_request(tmp_path, text):
    (tmp_path / job_files.REQUEST).write_text(text, errors="surrogateescape")
    assert job_files.asked(tmp_path) is None


def test_a_link_or_a_fifo_in_place_of_the_request_is_not_read_nor_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("requeue\n")
    folder = tmp_path / "attempt"
    folder.mkdir()
    (folder / job_files.REQUEST).symlink_to(elsewhere)
    assert job_files.asked(folder) is None
    with pytest.raises(OSError):
        job_files.ask(folder, "cancel")
    assert elsewhere.read_text() == "requeue\n"
    (folder / job_files.REQUEST).unlink()
    os.mkfifo(folder / job_files.REQUEST)
    assert job_files.asked(folder) is None          # returns at once: no writer is waited for


def test_only_a_local_attempt_has_a_directory_for_requests(tmp_path):
    assert job_files.directory(env_of(tmp_path)) == tmp_path
    assert job_files.directory({}) is None
    assert job_files.directory({**env_of(tmp_path), "AWS_BATCH_JOB_ID": "b-1"}) is None


def test_facts_are_read_back_as_written(tmp_path):
    fd = os.open(tmp_path / job_files.FACTS, os.O_WRONLY | os.O_CREAT, 0o600)
    job_files.write_facts(fd, {"Command": "/w/train.sh", "StdOut": "/w/slurm-7.out", "Odd": "a\nb"})
    os.close(fd)
    assert job_files.facts(env_of(tmp_path)) == {"Command": "/w/train.sh", "StdOut": "/w/slurm-7.out",
                                                  "Odd": "a b"}
    assert job_files.facts({}) == {}
