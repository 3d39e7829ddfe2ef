"""A shared box's daemon that takes a request and says nothing (stopped with
SIGSTOP, hung): every command tells its user on stderr once the daemon has
been silent for SLOW_AFTER, a read gives up after READ_TIMEOUT naming the
daemon's pid and how to look at it, and a change keeps waiting, since the
daemon may be carrying it out."""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from cli import daemon_backend, daemon_socket
from cli.daemon_backend import SocketApi
from cli.daemon_socket import address
from gqa.adapters.local.system import MARKER
from gqa.models.errors import BackendUnavailable


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(daemon_socket, "SLOW_AFTER", 0.2)
    monkeypatch.setattr(daemon_backend, "READ_TIMEOUT", 1.0, raising=False)   # absent before reads had a limit


@pytest.fixture
def silent(tmp_path):
    """A socket that takes connections (the kernel's backlog) and never reads or answers."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(address(str(tmp_path)))
    sock.listen(8)
    yield tmp_path
    sock.close()


def test_a_read_is_told_after_slow_after_and_gives_up_with_the_daemons_pid(silent, fast):
    err = io.StringIO()
    began = time.monotonic()
    with pytest.raises(BackendUnavailable) as gave_up:
        SocketApi(silent, stderr=err).call("GET", "/queue")
    took = time.monotonic() - began
    pid = os.getpid()                                  # the listener: this test
    assert 1.0 <= took < 5, took
    assert err.getvalue() == (f"gqa: waiting for the queue daemon at {silent} (pid {pid}), which has not answered "
                              "for 0 s; waiting up to 1 s\n")
    assert str(gave_up.value) == (f"the queue daemon at {silent} (pid {pid}) did not answer within 1 s; it may be "
                                  f"busy or hung: `ps -o pid,stat,etime -p {pid}` shows it (stat T: stopped), and an "
                                  "admin of this machine can read its log")


def test_a_change_keeps_waiting_past_the_reads_limit_and_says_it_may_have_been_done(silent, fast):
    err = io.StringIO()
    began = time.monotonic()
    with pytest.raises(BackendUnavailable) as gave_up:
        SocketApi(silent, stderr=err, timeout=2.0).call("POST", "/jobs/1/cancel")
    assert time.monotonic() - began >= 2.0                                # not the read's 1 s
    assert err.getvalue().endswith("; waiting up to 2 s (it may be carrying out the request)\n")
    assert str(gave_up.value).endswith("it may have carried out the request: check `gqa queue` before trying again")


def test_a_stopped_daemon_is_named_stopped_and_json_output_stays_clean(tmp_path, fast, monkeypatch, capsys):
    """`gqa queue -o json` on a shared box whose daemon is stopped (SIGSTOP): the note and the
    error on stderr, nothing on stdout, exit 2, within the read's limit."""
    from cli.main import main

    (tmp_path / MARKER).write_text(json.dumps({"admin_groups": [], "approver_groups": []}))
    listener = subprocess.Popen([sys.executable, "-c", (
        "import socket, sys, time; s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); "
        "s.bind(sys.argv[1]); s.listen(8); print('ready', flush=True); time.sleep(60)"),
        str(address(str(tmp_path)))], stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline() == "ready\n"
        os.kill(listener.pid, signal.SIGSTOP)
        monkeypatch.setenv("GQA_HOME", str(tmp_path))
        monkeypatch.setenv("GQA_CONFIG", str(tmp_path / "no-config"))
        began = time.monotonic()
        code = main(["queue", "-o", "json"])
        took = time.monotonic() - began
    finally:
        listener.kill()
        listener.wait()
    out, err = capsys.readouterr()
    pid = listener.pid
    stopped = rf": it is stopped \(`kill -CONT {pid}` resumes it\)"
    assert (code, out) == (2, "") and took < 5, (code, out, took)
    note, error = err.splitlines()
    assert re.fullmatch(rf"gqa: waiting for the queue daemon at {re.escape(str(tmp_path))} \(pid {pid}\), which "
                        rf"has not answered for \d s{stopped}; waiting up to 1 s", note), note
    assert re.fullmatch(rf"gqa: error: the queue daemon at {re.escape(str(tmp_path))} \(pid {pid}\) did not "
                        rf"answer within 1 s{stopped}", error), error
