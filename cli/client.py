"""The `gqa` executable. It imports only a few standard modules: when a
daemon is listening it has `gqa submit` served there (daemon/submit_command.py)
and prints the answer; otherwise, and for every other command, it runs the
command here. When `gqa config` chooses the AWS backend, the local daemon is
never asked.

The request is one JSON line on the daemon's socket (daemon/server.py). A
daemon that is saturated answers "busy" at once; the client then waits a
jittered moment and asks again, so a burst of submits queues here instead
of failing."""

import os
import socket
import sys

# commands the daemon answers; anything that waits, follows logs or starts daemons runs here
SERVED = {"submit"}
LOCAL_FLAGS = {"--wait", "-W", "--help", "-h"}
_MAX_PATH = 100  # sun_path holds 108 bytes
CONNECT_TIMEOUT = 5.0     # a daemon that cannot even accept is treated as busy
REPLY_TIMEOUT = 120.0
BUSY_FOR = 120.0          # seconds of "busy" answers before giving up


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
    """The daemon's request socket: GQA_HOME/cli.sock, or an abstract socket
    named after the home when that path is too long for a Unix socket."""
    path = os.path.join(home, "cli.sock")
    if len(path.encode()) < _MAX_PATH:
        return path
    import hashlib

    return b"\0gqa-" + hashlib.sha256(home.encode()).hexdigest()[:24].encode() + b"-cli"


def home_from_env() -> str:
    """GQA_HOME; else ~/.gqa if it exists; else a shared box's /var/lib/gqa
    if one runs there; else ~/.gqa (as gqa.adapters.local.system.state_home)."""
    home = os.environ.get("GQA_HOME")
    if home:
        return os.path.abspath(home)
    own = os.path.join(os.path.expanduser("~"), ".gqa")
    if not os.path.exists(own) and os.path.exists(os.path.join(SYSTEM_HOME, "system")):
        return SYSTEM_HOME
    return os.path.abspath(own)


SYSTEM_HOME = "/var/lib/gqa"


def _ask_daemon(argv: list[str]) -> dict | None:
    """The daemon's answer, or None when no daemon listens (run the command here)."""
    import json
    import random
    import time

    body = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    request = json.dumps({"v": 1, "method": "POST", "path": "/cli/submit", "body": body}).encode() + b"\n"
    give_up, told = time.monotonic() + BUSY_FOR, False
    while True:
        answer = exchange(address(home_from_env()), request)
        if answer is None:
            return None
        if answer.get("status") == 503 and time.monotonic() < give_up:
            if not told:
                sys.stderr.write("gqa: the queue daemon is busy; retrying\n")
                told = True
            delay = (answer.get("body") or {}).get("retry_after") or 0.05
            time.sleep(float(delay) * (0.5 + random.random()))
            continue
        body = answer.get("body")
        if answer.get("status") == 200 and isinstance(body, dict) and "code" in body:
            return body
        message = body.get("error") if isinstance(body, dict) else None
        return {"code": 2 if answer.get("status") in (400, 403, 413) else 1, "stdout": "",
                "stderr": f"gqa: error: {message or 'the queue daemon gave an unexpected answer'}\n"}


def _owner_of(where) -> str:
    import pwd

    try:
        uid = os.stat(where).st_uid
        return pwd.getpwuid(uid).pw_name
    except (OSError, KeyError, TypeError, ValueError):
        return "another user"


def exchange(where, request: bytes) -> dict | None:
    """One request, one reply. None when nothing listens there (nothing was
    sent); {"status": 503} when the daemon could not even accept in time
    (nothing was sent either, so asking again is safe); a lost reply once
    the request is sent is an error, never a retry: the daemon may have acted."""
    import json

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(where)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except PermissionError:   # a daemon listens, for someone else: say whose, never write its queue ourselves
        sock.close()
        return {"status": 403, "body": {"error": f"this queue belongs to {_owner_of(where)}: its daemon does not "
                                                 "serve you; use your own (`GQA_HOME=~/.gqa gqa local start`) "
                                                 "or ask for a shared one (`gqa local start --system`)"}}
    except (socket.timeout, BlockingIOError, InterruptedError):
        sock.close()
        return {"status": 503, "body": {"retry_after": 0.1}}
    except OSError:
        sock.close()
        return None
    lost = {"status": 500, "body": {"error": "lost contact with the queue daemon; check `gqa queue` "
                                             "before submitting again"}}
    with sock:
        sock.settimeout(REPLY_TIMEOUT)
        try:
            sock.sendall(request)
        except OSError:
            pass   # a busy daemon answers and closes before reading: its answer may be waiting
        data = b""
        try:
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        try:
            answer = json.loads(data) if data.endswith(b"\n") else None
        except ValueError:
            answer = None
        return answer if isinstance(answer, dict) else lost
