"""The local daemon's request socket as its clients see it: where it listens
(`address`) and one request, one reply (`exchange`). One JSON line each way
(daemon/server.py). Standard library only: the light `gqa` client
(cli/client.py) imports it before anything else of gqa."""

import os
import socket

_MAX_PATH = 100  # sun_path holds 108 bytes
CONNECT_TIMEOUT = 5.0     # a daemon that cannot even accept is treated as busy
REPLY_TIMEOUT = 120.0


def address(home: str) -> str | bytes:
    """The daemon's request socket: GQA_HOME/cli.sock, or an abstract socket
    named after the home when that path is too long for a Unix socket."""
    path = os.path.join(home, "cli.sock")
    if len(path.encode()) < _MAX_PATH:
        return path
    import hashlib

    return b"\0gqa-" + hashlib.sha256(home.encode()).hexdigest()[:24].encode() + b"-cli"


def _owner_of(where) -> str:
    """Whose daemon listens at `where`: the socket's owner, or its home's (the
    queue's home), whose directory another user may stat though not enter."""
    import pwd

    for path in (where, os.path.dirname(where)):
        try:
            return pwd.getpwuid(os.stat(path).st_uid).pw_name
        except (OSError, KeyError, TypeError, ValueError):
            continue
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
