"""A spot interruption notice reaching a Batch job with code, as real
processes: the fetcher gqa.models.code.launch_command gives Batch runs the
command, a stand-in for the instance metadata service posts the notice once
the command is ready, and the command gets SIGTERM and the grace
(GQA_CHECKPOINT_GRACE) before SIGKILL. A command that then ends other than 0
is held until the instance goes (here: until 300 s past the notice's time,
which the stub sets in the past), so Batch would end the attempt as the
host's loss; one that exits 0 has finished and ends at once."""

from __future__ import annotations

import time

import pytest

from tests.e2e.test_code_fetch import launch, project
from tests.imds_stub import MetadataStub, notice_text

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JOB = ("import os, signal, sys, time\n"
       "mode = sys.argv[1]\n"
       "def stop(*_):\n"
       "    open(os.environ['MARK'], 'a').write(f'{os.getpid()} {time.time()}\\n')\n"
       "    if mode == 'ignore':\n"
       "        return\n"
       "    time.sleep(1.5)                   # the checkpoint's save\n"
       "    sys.exit(143 if mode == 'save' else 0)\n"
       "signal.signal(signal.SIGTERM, stop)\n"
       "open(os.environ['READY'], 'w').write(str(os.getpid()))\n"
       "for _ in range(60):\n"
       "    time.sleep(1)\n")


@pytest.fixture
def stub():
    served = MetadataStub()
    yield served
    served.close()


def run_noticed(tmp_path, stub, mode: str, *, grace: int, due_in: float):
    """Run the job in `mode`; the stub posts a notice due `due_in` seconds after it is first read,
    once the job is ready. (exit code, stderr, the job's pid, when SIGTERM reached it, when it all ended)."""
    proj = project(tmp_path)
    (proj / "spot.py").write_text(JOB)
    ready, mark = tmp_path / "ready", tmp_path / "mark"
    posted: list[str] = []

    def notice():
        if not ready.exists() or not ready.read_text():
            return None
        posted[:] = posted or [notice_text(time.time() + due_in)]
        return posted[0]

    stub.post(notice)
    job = launch(tmp_path, proj, ["python3", "spot.py", mode],
                 env={"AWS_BATCH_JOB_ID": "5f0c-1", "AWS_EC2_METADATA_SERVICE_ENDPOINT": stub.endpoint,
                      "GQA_CHECKPOINT_GRACE": str(grace), "READY": str(ready), "MARK": str(mark)})
    _, err = job.communicate(timeout=60)
    ended = time.time()
    pid, signalled = mark.read_text().split() if mark.exists() else ("", "0")
    assert pid == ready.read_text(), err                 # the command itself got SIGTERM
    return job.returncode, err, float(signalled), ended


def test_the_job_gets_sigterm_saves_within_its_grace_and_is_held_for_the_reclaim(tmp_path, stub):
    code, err, signalled, ended = run_noticed(tmp_path, stub, "save", grace=5, due_in=-294)
    assert code == 143, err
    assert "gqa: spot interruption notice: the spot instance is to terminate at " in err
    assert "SIGTERM to the job's processes, SIGKILL in 5 s if they have not ended" in err
    assert "ended with exit code 143 after the spot interruption notice; waiting for the instance to go" in err
    assert "still here 300 s past the notice's time; the job ends with exit code 143" in err
    # its 1.5 s save, then held until 300 s past the notice's time, about 6 s after the notice was read
    assert ended - signalled >= 3.5


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(tmp_path, stub):
    code, err, signalled, ended = run_noticed(tmp_path, stub, "ignore", grace=1, due_in=-400)
    assert code == 128 + 9, err
    assert 0.9 <= ended - signalled < 5 and "still here 300 s past" in err


def test_a_job_that_finishes_on_the_notice_ends_at_once(tmp_path, stub):
    code, err, signalled, ended = run_noticed(tmp_path, stub, "finish", grace=5, due_in=120)
    assert code == 0, err
    assert ended - signalled < 4 and "waiting for the instance" not in err
