"""The CLI's side of a shared box's daemon: SocketApi against a stand-in
server that answers canned lines (busy then OK, refused, malformed, errors),
the CLI's proxies over it against the real router, and which home and
backend a command uses."""

import io
import json
import os
import socket
import threading
from pathlib import Path

import pytest

from cli.backend import LocalBackend, local_backend
from cli.daemon_socket import address
from cli.daemon_backend import DaemonBackend, SocketApi
from gqa.adapters.local.system import MARKER, SYSTEM_HOME, state_home
from gqa.models.errors import BackendUnavailable, Conflict, NotFound, NotPermitted, SpecError


class CannedDaemon:
    """Answers each connection with the next of `answers` (bytes, or None to
    hang up without a word), after reading the request line; keeps the requests."""

    def __init__(self, home: Path, answers: list):
        self.answers, self.requests = list(answers), []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address(str(home)))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return   # closed by the test with answers left over: the client asked fewer times
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(json.loads(data))
                answer = self.answers.pop(0)
                if answer is not None:
                    conn.sendall(answer)

    def close(self):
        self.sock.close()


def line(status, body) -> bytes:
    return json.dumps({"status": status, "body": body}).encode() + b"\n"


BUSY = line(503, {"error": "busy", "retry_after": 0.05})


@pytest.fixture
def home(tmp_path):
    return tmp_path


@pytest.fixture
def serve(home):
    daemons = []

    def start(*answers):
        daemons.append(CannedDaemon(home, list(answers)))
        return daemons[-1]

    yield start
    for d in daemons:
        d.close()


def api(home, **kwargs):
    slept = []
    stderr = io.StringIO()
    client = SocketApi(home, sleep=slept.append, rng=lambda: 0.5, stderr=stderr, **kwargs)
    return client, slept, stderr


def test_a_request_is_one_json_line_and_the_query_travels_as_a_url_would_carry_it(home, serve):
    daemon = serve(line(200, {"ok": True}))
    client, _, _ = api(home)
    assert client.call("get", "/queue", query={"group": None, "explain": False, "limit": 5}) == {"ok": True}
    assert daemon.requests == [{"v": 1, "method": "GET", "path": "/queue",
                                "query": {"explain": "false", "limit": "5"}, "body": None}]


def test_busy_is_retried_with_backoff_and_said_once(home, serve):
    daemon = serve(BUSY, BUSY, line(201, {"jobs": ["1"]}))
    client, slept, stderr = api(home)
    assert client.call("POST", "/jobs", body={"spec": {}}) == {"jobs": ["1"]}
    assert len(daemon.requests) == 3 and len(slept) == 2
    assert slept[1] > slept[0] >= 0.05                  # retry_after, plus a growing jittered wait
    assert stderr.getvalue() == "gqa: the queue daemon is busy; retrying\n"


def test_busy_for_too_long_gives_up_in_one_line(home, serve):
    serve(*[BUSY] * 50)
    client, slept, _ = api(home, busy_wait=0.5)
    with pytest.raises(BackendUnavailable, match="stayed busy"):
        client.call("GET", "/queue")
    assert sum(slept) >= 0.5 and len(slept) < 50


def test_no_daemon_is_one_line_naming_the_home(home):
    client, _, _ = api(home)
    with pytest.raises(BackendUnavailable, match=f"the shared queue daemon at {home} is not running"):
        client.call("GET", "/queue")


@pytest.mark.parametrize("answer, words", [
    (b"not json\n", "not JSON"),
    (line("200", {}), "without a status"),
    (b'{"body": {}}\n', "without a status"),
    (line(200, ["a list"]), "not a JSON object"),
    (None, "lost contact"),                                  # hung up after taking the request
])
def test_a_malformed_or_missing_answer_is_backend_unavailable(home, serve, answer, words):
    serve(answer)
    client, _, _ = api(home)
    with pytest.raises(BackendUnavailable, match=words):
        client.call("POST", "/jobs/1/cancel")


def test_a_lost_answer_to_a_change_says_to_check_before_trying_again(home, serve):
    serve(None)
    client, _, _ = api(home)
    with pytest.raises(BackendUnavailable, match="check `gqa queue` before trying again"):
        client.call("POST", "/jobs", body={})


@pytest.mark.parametrize("answer, error, message", [
    (line(403, {"error": "NotPermitted", "message": "job 1 belongs to alice"}), NotPermitted,
     "job 1 belongs to alice"),
    (line(409, {"error": "Conflict", "message": "moved"}), Conflict, "moved"),
    (line(404, {"error": "NotStarted", "message": "job 1 has not started yet"}), NotFound, "not started"),
    # the server's own framing errors carry no class: the status tells
    (line(400, {"error": "malformed request: not one JSON object"}), SpecError, "malformed request"),
    (line(413, {"error": "request over 4 MiB"}), BackendUnavailable, "request over 4 MiB"),
])
def test_errors_come_back_as_the_domain_error(home, serve, answer, error, message):
    serve(answer)
    client, _, _ = api(home)
    with pytest.raises(error, match=message):
        client.call("GET", "/jobs/1")


def test_not_started_keeps_its_class_so_a_follower_waits(home, serve):
    from gqa.models.errors import NotStarted

    serve(line(404, {"error": "NotStarted", "message": "job 1 has not started yet"}))
    client, _, _ = api(home)
    with pytest.raises(NotStarted):
        client.call("GET", "/jobs/1/logs")


# -- the CLI's proxies over the socket, against the real router --------------------------------------

class RouterDaemon:
    """The daemon's routes behind a socket, the caller from SO_PEERCRED (the lead's
    server frames requests the same way)."""

    def __init__(self, home: Path):
        import struct

        from daemon.callers import local_access
        from daemon.routes import Router
        from gqa.ports import Inventory
        from gqa.scheduling.snapshot import Gpu

        self.wiring = LocalBackend(home)
        self.wiring.store.set_inventory(Inventory(gpus=tuple(Gpu(i, "a10g") for i in range(2)), cpus=4,
                                                  memory=8 << 30))
        router = Router(self.wiring, local_access(home))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address(str(home)))
        self.sock.listen(8)

        def serve():
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                with conn:
                    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
                    data = b""
                    while not data.endswith(b"\n"):
                        data += conn.recv(65536)
                    status, body = router.serve(_Peer(uid, gid), json.loads(data))
                    conn.sendall(json.dumps({"status": status, "body": body}).encode() + b"\n")

        threading.Thread(target=serve, daemon=True).start()


class _Peer:
    def __init__(self, uid, gid):
        self.uid, self.gid = uid, gid


def test_the_cli_proxies_work_unchanged_over_the_socket(tmp_path):
    from gqa.models.loader import validate

    daemon = RouterDaemon(tmp_path)
    be = DaemonBackend(tmp_path)
    try:
        job = be.submitter().submit(validate({"command": ["true"], "workdir": "/"}),
                                    environment={"WANDB_API_KEY": "k"}).first
        assert daemon.wiring.store.get(job.id).submit_env == {"WANDB_API_KEY": "k"}
        assert [e.job.id for e in be.queries().queue().pending] == [job.id]
        assert be.queries().jobs(job.id)[0].submit_env is None            # never sent back
        [result] = be.control().cancel([job.id])
        assert result.action == "cancelled"
        assert be.quota().set("vision", max_gpus=1).max_gpus == 1          # root is an admin
        assert be.whoami()["owner"] == "root"
        with pytest.raises(BackendUnavailable, match="AWS backend only"):
            be.triggers()
    finally:
        daemon.sock.close()


# -- which home, which backend ---------------------------------------------------------------------

@pytest.mark.parametrize("gqa_home, own_exists, system_exists, expected", [
    ("/x/q", True, True, "/x/q"),
    (None, True, True, "own"),
    (None, False, True, "system"),
    (None, False, False, "own"),
])
def test_the_home_a_command_uses(tmp_path, monkeypatch, gqa_home, own_exists, system_exists, expected):
    import gqa.adapters.local.system as system

    fake_system = tmp_path / "var-lib-gqa"
    monkeypatch.setattr(system, "SYSTEM_HOME", fake_system)
    if own_exists:
        (tmp_path / ".gqa").mkdir()
    if system_exists:
        fake_system.mkdir()
        (fake_system / MARKER).write_text("{}")
    env = {"HOME": str(tmp_path), **({"GQA_HOME": gqa_home} if gqa_home else {})}
    want = {"own": tmp_path / ".gqa", "system": fake_system}.get(expected, Path(expected))
    assert system.state_home(env) == want


def test_the_system_home_is_var_lib_gqa():
    assert SYSTEM_HOME == Path("/var/lib/gqa") and state_home({"GQA_HOME": "rel"}).is_absolute()


@pytest.mark.parametrize("marker, kind", [(True, DaemonBackend), (False, LocalBackend)])
def test_a_system_queue_is_reached_through_its_daemon_only(tmp_path, monkeypatch, marker, kind):
    monkeypatch.setenv("GQA_HOME", str(tmp_path))
    if marker:
        (tmp_path / MARKER).write_text(json.dumps({"admin_groups": [], "approver_groups": []}))
    be = local_backend()
    assert type(be) is kind
    assert not (tmp_path / "gqa.db").exists()             # choosing opened nothing


def test_a_users_own_home_is_created_private(tmp_path):
    home = tmp_path / "fresh"
    LocalBackend(home).paths   # noqa: B018  (reading it creates the home)
    assert os.stat(home).st_mode & 0o777 == 0o700
