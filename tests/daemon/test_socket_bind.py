"""Where the daemon cannot listen: an abstract name another process took first,
something other than a socket at its path. One line naming the address, never
a traceback; a socket a dead daemon left is replaced."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.server import RequestServer
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.wake import Doorbell
from gqa.models.errors import BackendUnavailable, StorageUnavailable

ROOT = Path(__file__).resolve().parents[2]


def no_handler(peer, request):
    return 200, "ok"


def test_an_abstract_name_taken_first_is_refused_in_one_line():
    name = b"\0gqa-test-" + os.urandom(6).hex().encode() + b"-cli"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as squatter:
        squatter.bind(name)
        with pytest.raises(BackendUnavailable) as refused:
            RequestServer(name, no_handler)
    assert str(refused.value) == f"cannot listen at @{name[1:].decode()}: another process holds it"


def test_a_directory_at_the_request_sockets_path_is_named(tmp_path):
    (tmp_path / "cli.sock").mkdir()
    with pytest.raises(StorageUnavailable) as refused:
        RequestServer(str(tmp_path / "cli.sock"), no_handler)
    assert str(refused.value) == (f"cannot listen at {tmp_path}/cli.sock: a directory is there, not a socket; "
                                  "move it away and start again")
    assert (tmp_path / "cli.sock").is_dir()


def test_a_file_at_the_doorbells_path_is_named_and_left_there(tmp_path):
    (tmp_path / "daemon.sock").write_text("mine")
    with pytest.raises(StorageUnavailable, match=r"daemon.sock: a regular file is there, not a socket"):
        Doorbell(StatePaths(tmp_path))
    assert (tmp_path / "daemon.sock").read_text() == "mine"


def test_a_socket_a_dead_daemon_left_is_replaced(tmp_path):
    for name in ("cli.sock", "daemon.sock"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as left:
            left.bind(str(tmp_path / name))
    server = RequestServer(str(tmp_path / "cli.sock"), no_handler)
    bell = Doorbell(StatePaths(tmp_path))
    server.close()
    bell.close()


def test_a_start_whose_daemon_cannot_listen_says_why_and_logs_one_line(tmp_path):
    home = tmp_path / "q"
    home.mkdir(mode=0o700)
    (home / "cli.sock").mkdir()
    env = dict(os.environ, GQA_HOME=str(home), GQA_CONFIG=str(tmp_path / "no-config"), PYTHONPATH=str(ROOT))
    started = subprocess.run([sys.executable, "-m", "cli.main", "local", "start", "--gpus", "1", "--detach"],
                             env=env, capture_output=True, text=True, timeout=60)
    said = f"cannot listen at {home}/cli.sock: a directory is there, not a socket; move it away and start again"
    assert (started.returncode, started.stderr) == (2, f"gqa: error: {said}\n")
    log = (home / "daemon.log").read_text()
    assert "Traceback" not in log and log.rstrip("\n").endswith(said)
