"""The daemon's request socket: one JSON line each way, never blocking the
loop on a client, and "busy" (which the client retries) past its cap."""

import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time

import pytest

from cli.daemon_socket import exchange
from daemon.server import RequestServer


class Served:
    """A RequestServer on a real Unix socket, its loop in a thread."""

    def __init__(self, path, handler, max_clients=64, max_per_user=None):
        where = path if isinstance(path, bytes) else str(path)
        self.server = RequestServer(where, handler, max_clients=max_clients, max_per_user=max_per_user)
        self.selector = selectors.DefaultSelector()
        self.server.attach(self.selector)
        self.running = True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while self.running:
            for key, mask in self.selector.select(0.05):
                key.data(mask)
            self.server.expire()

    def close(self):
        self.running = False
        self.thread.join(2)
        self.server.close()


@pytest.fixture
def serve(tmp_path):
    started = []

    def make(handler, where=None, **kw):
        s = Served(where or tmp_path / "cli.sock", handler, **kw)
        started.append(s)
        return s

    yield make
    for s in started:
        s.close()


def ask(path, request):
    return exchange(str(path), json.dumps(request).encode() + b"\n")


def test_a_request_gets_its_answer_and_the_callers_credentials(serve, tmp_path):
    seen = []
    serve(lambda peer, req: (seen.append((peer.uid, req["path"])), (200, {"echo": req["body"]}))[1])

    answer = ask(tmp_path / "cli.sock", {"v": 1, "method": "GET", "path": "/x", "body": [1, 2]})

    assert answer == {"status": 200, "body": {"echo": [1, 2]}}
    assert seen == [(os.getuid(), "/x")]


@pytest.mark.parametrize("line, status", [(b"not json\n", 400), (b"[1, 2]\n", 400)])
def test_a_malformed_request_is_answered_not_dropped(serve, tmp_path, line, status):
    serve(lambda peer, req: (200, {}))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(tmp_path / "cli.sock"))
        sock.sendall(line)
        reply = json.loads(sock.makefile().readline())
    assert reply["status"] == status and reply["body"]["error"]


def test_a_handler_that_fails_answers_500_and_the_server_goes_on(serve, tmp_path):
    def handler(peer, req):
        if req["path"] == "/boom":
            raise RuntimeError("bug")
        return 200, "fine"

    serve(handler)
    assert ask(tmp_path / "cli.sock", {"path": "/boom"})["status"] == 500
    assert ask(tmp_path / "cli.sock", {"path": "/ok"}) == {"status": 200, "body": "fine"}


def test_past_the_cap_a_client_is_told_busy_and_a_silent_client_blocks_nobody(serve, tmp_path):
    serve(lambda peer, req: (200, "ok"), max_clients=2)
    silent = [socket.socket(socket.AF_UNIX) for _ in range(2)]
    for sock in silent:
        sock.connect(str(tmp_path / "cli.sock"))   # connected, never asking
    time.sleep(0.2)

    answer = ask(tmp_path / "cli.sock", {"path": "/x"})
    assert answer["status"] == 503 and answer["body"]["error"] == "busy" and answer["body"]["retry_after"] > 0

    silent[0].close()
    time.sleep(0.2)
    assert ask(tmp_path / "cli.sock", {"path": "/x"}) == {"status": 200, "body": "ok"}
    silent[1].close()


def test_many_clients_at_once_are_all_answered(serve, tmp_path):
    serve(lambda peer, req: (200, req["body"]), max_clients=8)
    answers = [None] * 60

    def client(i):
        while True:
            answer = ask(tmp_path / "cli.sock", {"path": "/x", "body": i})
            if answer["status"] != 503:
                answers[i] = answer
                return
            time.sleep(0.01)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert answers == [{"status": 200, "body": i} for i in range(60)]


def test_nothing_listening_means_run_here(tmp_path):
    assert exchange(str(tmp_path / "nobody.sock"), b"{}\n") is None


def idle_connections(where, n):
    """n connections that never ask, each once the server has taken (or refused) it."""
    held = []
    for _ in range(n):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(where)
        held.append(sock)
    time.sleep(0.3)
    return held


def test_one_user_holding_idle_connections_is_told_busy_past_its_share_and_why(serve, tmp_path):
    serve(lambda peer, req: (200, "ok"), max_clients=8, max_per_user=2)
    held = idle_connections(str(tmp_path / "cli.sock"), 2)

    answer = ask(tmp_path / "cli.sock", {"path": "/x"})

    assert answer["status"] == 503 and answer["body"]["error"] == "busy"
    assert f"(uid {os.getuid()}) has 2 connections open to it, the most one user may" in answer["body"]["why"]
    held.pop().close()
    time.sleep(0.2)
    assert ask(tmp_path / "cli.sock", {"path": "/x"}) == {"status": 200, "body": "ok"}
    for sock in held:
        sock.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to ask as a second user")
def test_another_user_is_served_while_one_user_holds_every_connection_it_may(serve):
    where = b"\0gqa-test-" + os.urandom(6).hex().encode()   # abstract: no file modes stand in the way
    serve(lambda peer, req: (200, {"uid": peer.uid}), where=where, max_clients=4, max_per_user=2)
    held = idle_connections(where, 4)    # as many as the whole server takes
    code = ("import json, socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(b'\\0' + sys.argv[1].encode()); "
            "s.sendall(b'{\"path\": \"/x\"}\\n'); print(s.makefile().readline(), end='')")
    python = next((p for p in (os.path.realpath(sys.executable), "/usr/bin/python3") if _others_may_run(p)), None)
    if python is None:
        pytest.skip("no Python here that user 65534 may run")
    try:
        done = subprocess.run([python, "-I", "-c", code, where[1:].decode()], user=65534, group=65534,
                              cwd="/", capture_output=True, text=True, timeout=30)
    except PermissionError:
        pytest.skip(f"user 65534 may not run {python}")
    if "Permission denied" in done.stderr:
        pytest.skip(f"user 65534 may not run {python}: {done.stderr[-200:]}")
    assert json.loads(done.stdout) == {"status": 200, "body": {"uid": 65534}}, done.stderr
    for sock in held:
        sock.close()


def _others_may_run(path):
    from pathlib import Path

    path = Path(path)
    return path.exists() and all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents))


def test_the_client_says_how_long_the_daemon_stayed_busy_and_why(serve, tmp_path, monkeypatch, capsys):
    from cli import client

    serve(lambda peer, req: (200, "ok"), max_clients=8, max_per_user=1)
    held = idle_connections(str(tmp_path / "cli.sock"), 1)
    monkeypatch.setenv("GQA_HOME", str(tmp_path))
    monkeypatch.setattr(client, "BUSY_FOR", 0.5)

    said = client._ask_daemon(["submit", "--", "true"])

    assert said is not None and said["code"] == 1
    assert said["stderr"].startswith("gqa: error: the queue daemon stayed busy for ")
    assert "the most one user may" in said["stderr"] and "nothing was submitted" in said["stderr"]
    assert "is busy; retrying (this user" in capsys.readouterr().err
    for sock in held:
        sock.close()


def paused(where, handler):
    """A server whose loop the test turns by hand, as a daemon that was stopped and continues."""
    server = RequestServer(str(where), handler)
    selector = selectors.DefaultSelector()
    server.attach(selector)

    def turn():
        for _ in range(5):
            for key, mask in selector.select(0.05):
                key.data(mask)
    return server, turn


def test_a_request_whose_client_hung_up_before_it_was_read_is_dropped_not_carried_out(tmp_path):
    done = []
    server, turn = paused(tmp_path / "cli.sock", lambda peer, req: (done.append(req["path"]), (200, "ok"))[1])
    try:
        gone = socket.socket(socket.AF_UNIX)
        gone.connect(str(tmp_path / "cli.sock"))
        gone.sendall(b'{"path": "/gone"}\n')
        gone.close()                          # gave up while the daemon was stopped
        half = socket.socket(socket.AF_UNIX)
        half.connect(str(tmp_path / "cli.sock"))
        half.sendall(b'{"path": "/half"}\n')
        half.shutdown(socket.SHUT_WR)         # done writing, still reading: it is answered
        turn()
        assert json.loads(half.makefile().readline()) == {"status": 200, "body": "ok"}
        half.close()
    finally:
        server.close()
    assert done == ["/half"]


def test_a_client_that_gives_up_on_a_stopped_daemon_knows_nothing_was_done(tmp_path, monkeypatch):
    from cli import daemon_socket

    done, waited = [], []
    server, turn = paused(tmp_path / "cli.sock", lambda peer, req: (done.append(req), (200, "ok"))[1])
    monkeypatch.setattr(daemon_socket, "SLOW_AFTER", 0.2)
    try:
        answer = daemon_socket.exchange(str(tmp_path / "cli.sock"), b'{"path": "/x"}\n', timeout=0.6,
                                        waiting=lambda pid, seconds: waited.append((pid, seconds)))
        turn()                                # the daemon continues: the request is read, and dropped
    finally:
        server.close()
    assert answer["status"] == 504 and answer["body"]["unread"] is True and answer["body"]["pid"] == os.getpid()
    assert f"the queue daemon (pid {os.getpid()}) did not answer within 0.6 s" in answer["body"]["error"]
    assert len(waited) == 1 and waited[0][0] == os.getpid() and 0.2 <= waited[0][1] < 0.6
    assert done == []


def test_a_client_that_gives_up_on_a_request_being_carried_out_is_told_it_may_have_been(serve, tmp_path):
    from cli import daemon_socket

    serve(lambda peer, req: (time.sleep(1.0), (200, "late"))[1])   # read and acting, past the client's patience

    answer = daemon_socket.exchange(str(tmp_path / "cli.sock"), b'{"path": "/x"}\n', timeout=0.4)

    assert answer["status"] == 504 and answer["body"]["unread"] is False


def test_an_answer_that_takes_long_is_carried_out_and_sent_whole(serve, tmp_path, monkeypatch):
    """The request's deadline bounds reading it, not the work nor the sending: a large array's
    submission takes seconds and its answer is a megabyte, which the client must get whole."""
    from daemon import server

    monkeypatch.setattr(server, "REQUEST_TIMEOUT", 0.3)
    big = "x" * (4 << 20)
    serve(lambda peer, req: (time.sleep(0.6), (200, big))[1])   # past the request's deadline before answering

    answer = ask(tmp_path / "cli.sock", {"path": "/slow"})

    assert answer == {"status": 200, "body": big}


def test_a_client_that_takes_no_byte_of_its_answer_is_dropped(serve, tmp_path, monkeypatch):
    from daemon import server

    monkeypatch.setattr(server, "REPLY_STALL", 0.3)
    served = serve(lambda peer, req: (200, "x" * (4 << 20)))
    with socket.socket(socket.AF_UNIX) as stuck:
        stuck.connect(str(tmp_path / "cli.sock"))
        stuck.sendall(b'{"path": "/x"}\n')      # then never reads
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(c.answered for c in list(served.server._open.values())):
            time.sleep(0.02)
        assert served.server._open                # answered, its answer waiting on the client
        while time.monotonic() < deadline and served.server._open:
            time.sleep(0.05)
        assert not served.server._open            # no byte taken for REPLY_STALL: dropped
    assert ask(tmp_path / "cli.sock", {"path": "/x"})["status"] == 200


def test_a_client_that_never_finishes_its_request_is_dropped(serve, tmp_path, monkeypatch):
    from daemon import server

    monkeypatch.setattr(server, "REQUEST_TIMEOUT", 0.3)
    served = serve(lambda peer, req: (200, "ok"))
    with socket.socket(socket.AF_UNIX) as slow:
        slow.connect(str(tmp_path / "cli.sock"))
        slow.sendall(b'{"path": ')               # and no more
        time.sleep(0.8)
        assert not served.server._open and slow.recv(10) == b""
