"""`gqa submit FILE` through a running daemon: the client reads the file, and a
FIFO named as a job file is refused at once, never freezing the daemon that
serves everyone's submissions."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.e2e


def gqa(queue, *args, cwd, timeout=60):
    return subprocess.run([sys.executable, "-c", "from cli.client import run; run()", *args], env=queue.env,
                          cwd=str(cwd), capture_output=True, text=True, timeout=timeout)


def test_a_fifo_is_refused_and_the_daemon_goes_on_serving(queue, tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    stop = threading.Event()

    def unblock():   # should anything wait on the FIFO, a writer frees it: the test fails, never hangs
        if not stop.wait(10):
            try:
                os.close(os.open(tmp_path / "fifo.yaml", os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    threading.Thread(target=unblock, daemon=True).start()
    started = time.monotonic()
    try:
        refused = gqa(queue, "submit", "fifo.yaml", cwd=tmp_path)
        after = gqa(queue, "submit", "-o", "json", "--", "true", cwd=tmp_path)
    finally:
        stop.set()
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", "gqa: error: fifo.yaml is not a regular "
                                                                           "file\n")
    assert after.returncode == 0, after.stderr
    assert time.monotonic() - started < 8
    assert queue.wait(json.loads(after.stdout)["id"]).state.value == "SUCCEEDED"
    assert [j.id for j in queue.backend.store.list()] == [json.loads(after.stdout)["id"]]


def test_a_script_submitted_through_the_daemon_runs_as_the_client_read_it(queue, tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n#SBATCH --gpus=0\necho ran-from-script\n")
    script.chmod(0o755)
    proc = gqa(queue, "submit", "-o", "json", "run.sh", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = queue.wait(json.loads(proc.stdout)["id"])
    assert job.state.value == "SUCCEEDED" and job.name == "run.sh"
    assert json.loads(job.spec_json)["command"] == [str(script)]
    assert "ran-from-script" in (tmp_path / f"slurm-{job.id}.out").read_text()
