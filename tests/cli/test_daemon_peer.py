"""A client sends nothing to a process at the daemon's socket that is not the
queue's daemon: one of another uid than the queue's owner (root for a shared
box, the user for a personal queue), or, where the home's pid file says the
daemon's pid, another process."""

import json
import os
import pwd
import socket
import threading
import time

import pytest

from cli import client, daemon_socket
from cli.daemon_socket import address, daemon_says, exchange, owner_uid


class Listener:
    """A process's socket that takes connections and records what it is sent."""

    def __init__(self, where):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(where)
        self.sock.listen(8)
        self.got = b""
        threading.Thread(target=self._take, daemon=True).start()

    def _take(self):
        try:
            conn, _ = self.sock.accept()
            conn.settimeout(1.0)
            with conn:
                self.got += conn.recv(1 << 20)
        except OSError:
            pass

    def close(self):
        self.sock.close()


@pytest.fixture
def listener(tmp_path):
    started = Listener(str(tmp_path / "cli.sock"))
    yield started
    started.close()


def test_the_queues_owner_is_root_on_a_shared_box_and_the_user_on_a_personal_queue(tmp_path):
    assert owner_uid(str(tmp_path)) == os.geteuid()
    (tmp_path / "system").write_text("{}")
    assert owner_uid(str(tmp_path)) == 0


def test_a_listener_of_another_uid_is_sent_nothing_and_named(tmp_path, listener):
    other = os.geteuid() + 4242
    answer = exchange(str(tmp_path / "cli.sock"), b'{"path": "/x"}\n', owner=other)
    assert answer["status"] == 403
    assert answer["body"]["error"].startswith(
        f"this queue belongs to {pwd.getpwuid(os.geteuid()).pw_name}: the process listening at {tmp_path}/cli.sock "
        f"(pid {os.getpid()}) runs as uid {os.geteuid()}, not as the queue's owner (uid {other}), so nothing was "
        "sent to it; use your own queue")
    time.sleep(0.2)
    assert listener.got == b""


def test_a_submit_sends_its_environment_to_no_one_but_the_queues_owner(tmp_path, listener, monkeypatch, capsys):
    monkeypatch.setenv("GQA_HOME", str(tmp_path))
    monkeypatch.setenv("GQA_CONFIG", str(tmp_path / "no-config"))
    monkeypatch.setenv("SECRET_OF_THE_USER", "s3cret")
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 4242)   # the queue is another user's than the listener's
    reply = client._ask_daemon(["submit", "--", "true"])
    assert reply["code"] == 2 and reply["stderr"].startswith("gqa: error: this queue belongs to ")
    assert f"runs as uid {me}, not as the queue's owner (uid {me + 4242})" in reply["stderr"]
    time.sleep(0.2)
    assert listener.got == b""


def test_the_daemons_status_is_asked_of_its_recorded_pid_alone(tmp_path, listener):
    """A process that took the socket's name while the daemon starts is not waited on: its pid is not
    the one the home's pid file records."""
    (tmp_path / "daemon.pid").write_text(str(os.getpid() + 100000))
    began = time.monotonic()
    assert daemon_says(str(tmp_path), timeout=3.0) is None
    assert time.monotonic() - began < 1.0
    assert listener.got == b""


def test_the_daemon_itself_is_asked(tmp_path, monkeypatch):
    """The recorded pid and this user's uid: asked, and the answer read."""
    where = address(str(tmp_path))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
        daemon.bind(where)
        daemon.listen(1)
        (tmp_path / "daemon.pid").write_text(str(os.getpid()))

        def answer():
            conn, _ = daemon.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(json.dumps({"status": 200, "body": {"pid": os.getpid()}}).encode() + b"\n")

        threading.Thread(target=answer, daemon=True).start()
        assert daemon_says(str(tmp_path), timeout=3.0) == {"pid": os.getpid()}
    assert daemon_socket.shown(b"\0gqa-x-cli") == "@gqa-x-cli"
