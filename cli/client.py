"""The `gqa` executable. It imports only a few standard modules: when a
daemon is listening it runs `gqa submit` there (see server.py) and prints the
answer; otherwise, and for every other command, it runs the command here.
When `gqa config` chooses the AWS backend, the local daemon is never asked."""

import os
import socket
import sys

# commands the daemon answers; anything that waits, follows logs or starts daemons runs here
SERVED = {"submit"}
LOCAL_FLAGS = {"--wait", "-W", "--help", "-h"}
_MAX_PATH = 100  # sun_path holds 108 bytes


def run() -> None:
    argv = sys.argv[1:]
    if served(argv):
        reply = _ask_daemon(argv)
        if reply is not None:
            sys.stdout.write(reply["stdout"])
            sys.stderr.write(reply["stderr"])
            sys.stdout.flush()
            sys.exit(reply["code"])
    from .main import run as run_here

    run_here()


def served(argv: list[str]) -> bool:
    head = argv[: argv.index("--")] if "--" in argv else argv
    if not (argv and argv[0] in SERVED and not (LOCAL_FLAGS & set(head))):
        return False
    from .config_file import backend_of

    return backend_of() == "local"


def address(home: str) -> str | bytes:
    """The daemon's command socket: GQA_HOME/cli.sock, or an abstract socket
    named after the home when that path is too long for a Unix socket."""
    path = os.path.join(home, "cli.sock")
    if len(path.encode()) < _MAX_PATH:
        return path
    import hashlib

    return b"\0gqa-" + hashlib.sha256(home.encode()).hexdigest()[:24].encode() + b"-cli"


def home_from_env() -> str:
    home = os.environ.get("GQA_HOME") or os.path.join(os.path.expanduser("~"), ".gqa")
    return os.path.abspath(home)


def _ask_daemon(argv: list[str]) -> dict | None:
    import json

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address(home_from_env()))
    except OSError:
        sock.close()
        return None  # no daemon listening: run the command here
    # from here on the daemon may have acted: never fall back and risk doing it twice
    lost = {"code": 1, "stdout": "", "stderr": "gqa: error: lost contact with the queue daemon; "
            "check `gqa queue` before submitting again\n"}
    with sock:
        try:
            sock.settimeout(60.0)
            request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            return json.loads(data) if data else lost
        except (OSError, ValueError):
            return lost
