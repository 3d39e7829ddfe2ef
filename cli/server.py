"""The daemon answers `gqa submit` itself, like a build server: the `gqa`
client then needs only the standard library, and a submit costs a process
start and one round trip instead of importing typer and pydantic each time.

Protocol: the client connects to GQA_HOME/cli.sock, sends one JSON line
{"argv", "cwd", "env"}, and reads one JSON line {"code", "stdout", "stderr"}.
The caller's user comes from the socket's peer credentials, not the request."""

import contextlib
import io
import json
import os
import pwd
import socket
import struct
import traceback

from gqa.adapters.local.paths import StatePaths

from .client import address
from .context import CALLER, Caller

MAX_REQUEST = 4 << 20


class CommandServer:
    def __init__(self, paths: StatePaths):
        self.address = address(str(paths.home))
        if isinstance(self.address, str):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.address)
        if isinstance(self.address, str):
            os.chmod(self.address, 0o600)
        self.sock.listen(64)
        self.sock.setblocking(False)
        self.uid = os.getuid()

    def fileno(self) -> int:
        return self.sock.fileno()

    def handle(self) -> None:
        """Answer every pending connection (called when the socket is readable)."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return
            with conn:
                conn.settimeout(5.0)
                try:
                    self._answer(conn)
                except (OSError, ValueError):
                    pass  # the client went away or spoke nonsense; it falls back to running locally

    def _answer(self, conn: socket.socket) -> None:
        pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid not in (self.uid, 0):
            reply = {"code": 2, "stdout": "", "stderr": "gqa: error: this queue belongs to another user\n"}
        else:
            request = json.loads(_read_line(conn))
            reply = run_command(request["argv"], request["cwd"], request["env"], _user(uid))
        conn.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        self.sock.close()
        if isinstance(self.address, str):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)


def run_command(argv: list[str], cwd: str, env: dict[str, str], user: str | None) -> dict:
    from .main import main

    out, err = io.StringIO(), io.StringIO()
    token = CALLER.set(Caller(user=user, environment=env))
    here = os.getcwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except Exception:  # a bug must not take the daemon down; the client shows it
        err.write(traceback.format_exc())
        code = 1
    finally:
        os.chdir(here)
        CALLER.reset(token)
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("request too large")
    return data


def _user(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None
