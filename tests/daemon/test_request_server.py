"""The daemon's request socket: one JSON line each way, never blocking the
loop on a client, and "busy" (which the client retries) past its cap."""

import json
import selectors
import socket
import threading
import time

import pytest

from cli.daemon_socket import exchange
from daemon.server import RequestServer


class Served:
    """A RequestServer on a real Unix socket, its loop in a thread."""

    def __init__(self, path, handler, max_clients=64):
        self.server = RequestServer(str(path), handler, max_clients=max_clients)
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

    def make(handler, **kw):
        s = Served(tmp_path / "cli.sock", handler, **kw)
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
    import os
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
