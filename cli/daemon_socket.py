"""The local daemon's request socket as its clients see it: where it listens
(`address`) and one request, one reply (`exchange`). One JSON line each way
(daemon/server.py). Before anything is sent, the process listening must be the
queue's daemon (`refused`): an abstract socket's name is anyone's to take, and
a submission carries the caller's whole environment. Standard library only: the
light `gqa` client (cli/client.py) imports it before anything else of gqa."""

import os
import socket

_MAX_PATH = 100  # sun_path holds 108 bytes
SYSTEM_MARKER = "system"  # the file that makes a home a shared box's (gqa/adapters/local/system.py)
CONNECT_TIMEOUT = 5.0     # a daemon that cannot even accept is treated as busy
REPLY_TIMEOUT = 120.0     # a big array's submission is one transaction
SLOW_AFTER = 5.0          # seconds without an answer before the caller is told (exchange's `waiting`)


def address(home: str) -> str | bytes:
    """The daemon's request socket: GQA_HOME/cli.sock, or an abstract socket
    named after the home when that path is too long for a Unix socket."""
    path = os.path.join(home, "cli.sock")
    if len(path.encode()) < _MAX_PATH:
        return path
    import hashlib

    return b"\0gqa-" + hashlib.sha256(home.encode()).hexdigest()[:24].encode() + b"-cli"


def shown(where: str | bytes) -> str:
    """An address as `ss` writes it: a path, or an abstract name after "@"."""
    return where if isinstance(where, str) else "@" + where[1:].decode(errors="replace")


def owner_uid(home: str) -> int:
    """Who the daemon at `home` must run as: root on a shared box (its home holds the
    marker), else this user, whose personal queue it is."""
    return 0 if os.path.isfile(os.path.join(home, SYSTEM_MARKER)) else os.geteuid()


def _owner_at(where: str | bytes) -> int:
    """owner_uid for a bare address: a path's home is its directory; an abstract
    name does not say its home, so only this user's own daemon is trusted there."""
    return owner_uid(os.path.dirname(where)) if isinstance(where, str) else os.geteuid()


def refused(sock: socket.socket, where: str | bytes, owner: int, pid: int | None = None) -> str | None:
    """Why the process at the other end of `sock` is not the queue's daemon, in one line, or
    None where it is: its uid must be `owner`'s and, where the home says the daemon's `pid`, that pid."""
    creds = _peer_credentials(sock)
    if creds is None:
        return f"cannot tell which process listens at {shown(where)} (no peer credentials); nothing was sent"
    found_pid, uid = creds[0], creds[1]
    if uid != owner:   # another user's daemon (their personal queue), or a process holding its name
        from gqa.adapters.local.system import user_name

        return (f"this queue belongs to {user_name(uid)}: the process listening at {shown(where)} (pid "
                f"{found_pid}) runs as uid {uid}, not as the queue's owner (uid {owner}), so nothing was sent "
                "to it; use your own queue (`GQA_HOME=~/.gqa gqa local start`) or ask for a shared one "
                "(`gqa local start --system`)")
    if pid and found_pid and found_pid != pid:   # pid 0: a listener outside this pid namespace
        return (f"the process listening at {shown(where)} (pid {found_pid}) is not the queue's daemon "
                f"(pid {pid}): nothing was sent to it")
    return None


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


def stopped(pid: int | None) -> bool:
    """Whether the process is stopped (kill -STOP, Ctrl-Z, a debugger): /proc's state T or t."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[:1]
    except (OSError, IndexError):
        return False
    return state in ([b"T"], [b"t"])


def daemon_named(pid: int | None) -> str:
    return f"the queue daemon (pid {pid})" if pid else "the queue daemon"


def if_stopped(pid: int | None) -> str:
    """": it is stopped (...)" where it is, else ""."""
    return f": it is stopped (`kill -CONT {pid}` resumes it)" if stopped(pid) else ""


def exchange(where, request: bytes, *, owner: int | None = None, pid: int | None = None,
             timeout: float | None = None, waiting=None) -> dict | None:
    """One request, one reply. None when nothing listens there (nothing was
    sent); {"status": 503} when the daemon could not even accept in time
    (nothing was sent either, so asking again is safe); a lost reply once
    the request is sent is an error, never a retry: the daemon may have acted.
    Its body says the daemon's pid and whether the request was left `unread`:
    the daemon had not read all of it when the connection was shut, so it will
    drop it unanswered (daemon/server.py), and nothing was done.

    `owner`: the uid the daemon must run as (owner_uid of its home; by default
    as the address says, _owner_at), and `pid` the daemon's where known: any
    other listener is answered 403 and sent nothing. `timeout`: seconds to wait
    for the answer (REPLY_TIMEOUT); `waiting(pid, seconds)` is called once the
    daemon has been silent for SLOW_AFTER."""
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
        return {"status": 503, "body": {"retry_after": 0.1, "why": f"it did not take the connection within "
                                                                   f"{CONNECT_TIMEOUT:g} s"}}
    except OSError:
        sock.close()
        return None
    why = refused(sock, where, _owner_at(where) if owner is None else owner, pid)
    if why is not None:
        sock.close()
        return {"status": 403, "body": {"error": why}}
    with sock:
        wait = Wait(sock, REPLY_TIMEOUT if timeout is None else timeout, waiting)
        try:
            data = talk(sock, request, wait)
        except OSError:
            data = b""
        if data is None:
            return _lost(sock, wait, closed=False)
        answer = _parsed(data)
        return answer if answer is not None else _lost(sock, wait, closed=True)


def talk(sock: socket.socket, request: bytes, wait: "Wait", *, most: int | None = None) -> bytes | None:
    """Send the request on a connected socket and read the answer's line (what came before the
    daemon closed, if it closed first); None once `wait`'s deadline has passed. ValueError for an
    answer longer than `most` bytes; OSError where the connection broke while reading."""
    data = b""
    view = memoryview(request)
    while view:
        if not wait.until(write=True):
            return None
        try:
            view = view[sock.send(view):]
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            break   # a busy daemon answers and closes before reading: its answer may be waiting
    while not data.endswith(b"\n"):
        if not wait.until(write=False):
            return None
        try:
            chunk = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            continue
        if not chunk:
            break
        data += chunk
        if most is not None and len(data) > most:
            raise ValueError("the answer is too large")
    return data


class Wait:
    """The deadline of one exchange, and the one word to the caller once the daemon is slow
    (`waiting(pid, seconds)`, once, after SLOW_AFTER); `pid`: the daemon's, where the socket says."""

    def __init__(self, sock: socket.socket, timeout: float, waiting):
        import time

        self.sock, self.timeout, self.waiting, self.clock = sock, timeout, waiting, time.monotonic
        self.started = self.clock()
        self.told = waiting is None
        self.pid = _peer_pid(sock)
        sock.setblocking(False)

    def until(self, *, write: bool) -> bool:
        """Wait until the socket is ready; False once the deadline has passed."""
        import select

        poller = select.poll()
        poller.register(self.sock, select.POLLOUT if write else select.POLLIN)
        while True:
            waited = self.clock() - self.started
            if waited >= self.timeout:
                return False
            if not self.told and waited >= SLOW_AFTER:
                self.told = True
                self.waiting(self.pid, waited)
            end = self.timeout if self.told else min(self.timeout, SLOW_AFTER)
            if poller.poll(max(1, int((end - waited) * 1000))):
                return True


def _peer_pid(sock: socket.socket) -> int | None:
    """The daemon's pid: a connected client's peer credentials are the listener's."""
    creds = _peer_credentials(sock)
    return (creds[0] or None) if creds else None


def _peer_credentials(sock: socket.socket) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of the process that listens at the other end; None where the system cannot say."""
    import struct

    try:
        pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except (OSError, AttributeError, struct.error):
        return None
    return pid, uid, gid


def _parsed(data: bytes) -> dict | None:
    import json

    try:
        answer = json.loads(data) if data.endswith(b"\n") else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _lost(sock: socket.socket, wait: Wait, *, closed: bool) -> dict:
    if closed:
        said = f"{daemon_named(wait.pid)} closed the connection without answering"
        return {"status": 502, "body": {"error": said, "pid": wait.pid, "unread": False}}
    said = f"{daemon_named(wait.pid)} did not answer within {wait.timeout:g} s{if_stopped(wait.pid)}"
    return {"status": 504, "body": {"error": said, "pid": wait.pid, "unread": _left_unread(sock)}}


def _left_unread(sock: socket.socket) -> bool:
    """Shut the connection, then: is part of the request still in the daemon's
    receive queue? The daemon acts only on a whole line, and a line it reads
    after the shutdown is dropped, so then nothing was done."""
    import fcntl
    import struct
    import termios

    try:
        sock.shutdown(socket.SHUT_RDWR)
        queued = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    except (OSError, AttributeError, struct.error):
        return False
    return queued > 0


def daemon_says(home: str, timeout: float | None) -> dict | None:
    """What the daemon at `home` says of itself (GET /daemon), or None if it does not answer in
    `timeout` seconds."""
    import json

    request = json.dumps({"v": 1, "method": "GET", "path": "/daemon"}).encode() + b"\n"
    answer = exchange(address(home), request, owner=owner_uid(home), pid=_recorded_pid(home), timeout=timeout)
    if not answer or answer.get("status") != 200 or not isinstance(answer.get("body"), dict):
        return None
    return answer["body"]


def _recorded_pid(home: str) -> int | None:
    """The daemon's pid as its home's pid file says (written before it listens), where this user
    may read it: a process of the same user that took the socket's name is not taken for it."""
    try:
        with open(os.path.join(home, "daemon.pid"), "rb") as f:
            return int(f.read(32).strip() or 0) or None
    except (OSError, ValueError):
        return None


def told_troubles(status: dict | None) -> list[dict]:
    """The troubles a daemon's GET /daemon answer lists (none from a daemon too old to say)."""
    troubles = (status or {}).get("troubles")
    return [t for t in troubles if isinstance(t, dict)] if isinstance(troubles, list) else []
