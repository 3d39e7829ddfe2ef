"""`gqa submit FILE` served by the daemon: the client reads the job file or
script with its caller's rights and sends the bytes; the daemon (often root)
opens no file for a caller, and nothing that reads one waits on a FIFO."""

import base64
import json
import os
import threading
import time

import pytest

from cli.job_file import read_regular, sent_files
from cli.local_backend import LocalBackend
from daemon.requests import RequestHandler
from daemon.server import Peer
from daemon.submit_command import SubmitCommand
from gqa.models.errors import SpecError
from gqa.models.limits import MAX_SCRIPT_BYTES
from gqa.models.loader import load_spec
from gqa.ports import Inventory
from gqa.scheduling.snapshot import Gpu


@pytest.fixture
def be(tmp_path):
    backend = LocalBackend(tmp_path / "home")
    backend.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g"),), cpus=8, memory=64 << 30))
    return backend


def sent(path: str, data: bytes, executable: bool = False) -> list[dict]:
    return [{"path": path, "data": base64.b64encode(data).decode(), "executable": executable}]


def test_the_daemon_opens_no_file_its_caller_named(be, tmp_path):
    """A request naming a file it did not bring (an older client, or one that never read it) is
    refused: the daemon may be root, and the file one its caller may not read."""
    secret = tmp_path / "secret"
    secret.write_text("TOKEN=root-only\n")
    secret.chmod(0o600)

    answer = SubmitCommand(be.submitter()).run(["submit", "--gpus", "0", str(secret)], str(tmp_path), {}, None)

    assert answer["code"] == 2 and answer["stdout"] == ""
    assert answer["stderr"] == (f"gqa: error: {secret} did not come with the submission, and the queue daemon "
                                "opens no file for its callers: submit it with a gqa as new as the daemon\n")
    assert be.store.list() == []


def test_the_job_keeps_the_script_its_caller_sent_not_what_lies_at_the_path(be, tmp_path):
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho what-the-daemon-could-read\n")
    text = b"#!/bin/sh\n#SBATCH --gpus=0 -J from-client\necho sent\n"
    command = SubmitCommand(be.submitter())

    plain = command.run(["submit", "run.sh"], str(tmp_path), {}, None, files=sent("run.sh", text))
    runnable = command.run(["submit", "run.sh"], str(tmp_path), {}, None, files=sent("run.sh", text, True))

    assert plain["code"] == 0 and runnable["code"] == 0, (plain, runnable)
    first, second = (json.loads(be.store.get(a["stdout"].strip()).spec_json) for a in (plain, runnable))
    full = str(tmp_path / "run.sh")
    assert first["script"] == {"path": full, "text": text.decode()} and first["name"] == "from-client"
    assert first["command"] == ["/bin/sh", full] and second["command"] == [full]


def test_a_job_file_the_client_sent_is_read_with_its_limits(be, tmp_path):
    command = SubmitCommand(be.submitter())
    done = command.run(["submit", "-o", "json", "job.yaml"], "/nowhere", {}, None,
                       files=sent("job.yaml", b"name: sent\ncommand: [\"true\"]\n"))
    assert done["code"] == 0, done
    assert be.store.get(json.loads(done["stdout"])["id"]).name == "sent"
    big = command.run(["submit", "big.sh"], "/nowhere", {}, None, files=sent("big.sh", b"#" * (MAX_SCRIPT_BYTES + 1)))
    assert big["code"] == 2 and "larger than 512 KiB, the limit for a batch script" in big["stderr"]


def test_a_file_the_client_could_not_read_is_refused_in_the_clients_words(be):
    unread = [{"path": "secret", "error": "cannot read secret: Permission denied"}]
    answer = SubmitCommand(be.submitter()).run(["submit", "secret"], "/", {}, None, files=unread)
    assert answer == {"code": 2, "stdout": "", "stderr": "gqa: error: cannot read secret: Permission denied\n"}


@pytest.mark.parametrize("files", [{"a": 1}, [{"path": 3}], [{"path": "a", "data": "!!"}],
                                   [{"path": "a", "data": "", "executable": "yes"}],
                                   [{"path": "a", "data": "A" * (MAX_SCRIPT_BYTES * 2)}]])
def test_malformed_files_are_refused(be, files):
    answer = SubmitCommand(be.submitter()).run(["submit", "a"], "/", {}, None, files=files)
    assert answer["code"] == 2 and answer["stderr"].startswith("gqa: error: malformed submit request: ")
    assert be.store.list() == []


def test_the_request_handler_passes_the_files_on(be, tmp_path):
    handler = RequestHandler(SubmitCommand(be.submitter()), lambda: {})
    body = {"argv": ["submit", "job.yaml"], "cwd": str(tmp_path), "env": {},
            "files": sent("job.yaml", b"command: [\"true\"]\n")}
    status, answer = handler(Peer(0, os.getuid(), os.getgid()), {"v": 1, "method": "POST", "path": "/cli/submit",
                                                                "body": body})
    assert (status, answer["code"]) == (200, 0), answer


# -- the client's side: what it reads and sends ------------------------------------------------------

def test_the_client_sends_the_file_it_reads(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    [entry] = sent_files(["--gpus", "1", "-o", "json", "run.sh"], str(tmp_path))
    assert entry == {"path": "run.sh", "data": base64.b64encode(b"#!/bin/sh\necho hi\n").decode(), "executable": True}
    assert sent_files(["--gpus", "1"], str(tmp_path)) == [] and sent_files(["-"], str(tmp_path)) == []
    assert sent_files(["missing.yaml"], str(tmp_path)) == [{"path": "missing.yaml",
                                                            "error": "no such file: missing.yaml"}]
    assert sent_files([str(tmp_path)], "/") == [{"path": str(tmp_path),
                                                 "error": f"{tmp_path} is a directory, not a job file or script"}]


def test_the_client_reads_no_more_than_a_script_may_hold(tmp_path):
    (tmp_path / "big.sh").write_bytes(b"#" * (MAX_SCRIPT_BYTES + 1000))
    assert len(read_regular(str(tmp_path / "big.sh"), "big.sh", MAX_SCRIPT_BYTES)) == MAX_SCRIPT_BYTES + 1


def unblocked_after(fifo, seconds: float) -> threading.Event:
    """A watchdog: should a reader wait on the FIFO, a writer opens it after `seconds`, so a
    test of the old behaviour fails instead of hanging."""
    stop = threading.Event()

    def watch():
        if not stop.wait(seconds):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    threading.Thread(target=watch, daemon=True).start()
    return stop


@pytest.mark.parametrize("reader", ["client", "loader"])
def test_a_fifo_is_refused_at_once_never_waited_on(tmp_path, reader):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    stop = unblocked_after(fifo, 3.0)
    started = time.monotonic()
    try:
        if reader == "client":
            said = sent_files(["fifo.yaml"], str(tmp_path))
        else:
            with pytest.raises(SpecError) as caught:
                load_spec("fifo.yaml", cwd=str(tmp_path))
            said = [{"path": "fifo.yaml", "error": str(caught.value)}]
    finally:
        stop.set()
    assert time.monotonic() - started < 2.0
    assert said == [{"path": "fifo.yaml", "error": "fifo.yaml is not a regular file"}]


def test_a_device_is_refused_unopened(tmp_path):
    with pytest.raises(SpecError, match="^/dev/null is not a regular file$"):
        load_spec("/dev/null")
    assert sent_files(["/dev/null"], "/") == [{"path": "/dev/null", "error": "/dev/null is not a regular file"}]


def test_the_daemon_tells_its_caller_when_the_team_s_budget_will_hold_the_job(be, tmp_path):
    """The light client's `gqa submit` says what the CLI run here says (cli/submit.submitted_text)."""
    from gqa.scheduling import TeamPolicy

    be.store.set_inventory(Inventory(gpus=(Gpu(0, "a10g", price=3600.0),), cpus=8, memory=64 << 30))
    be.store.set_team("nlp", TeamPolicy(budget=1.0))

    answer = SubmitCommand(be.submitter()).run(["submit", "--team", "nlp", "--time", "1m", "--", "echo"],
                                               str(tmp_path), {}, None)

    assert answer["code"] == 0 and answer["stdout"] == "1\n"
    assert ("note: job 1 will be held by its team's budget: team nlp budget: spent $0.00 + $0.00 its running jobs "
            "may still cost + $60.00 for this job = $60.00, over $1.00 this period\n") in answer["stderr"]
