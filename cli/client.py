"""The `gqa` executable. It imports only a few standard modules: when a
daemon is listening it has `gqa submit` served there (daemon/submit_command.py)
and prints the answer; otherwise, and for every other command, it runs the
command here. When `gqa config` chooses the AWS backend, the local daemon is
never asked.

The request is one JSON line on the daemon's socket (daemon/server.py),
with the job file or script read here, as the caller (cli/job_file.py). A
daemon that is saturated answers "busy" at once; the client then waits a
jittered moment and asks again, so a burst of submits queues here instead
of failing."""

import os
import sys

from . import daemon_socket
from .daemon_socket import address, daemon_named, exchange, if_stopped, owner_uid
from .version import version_line

# commands the daemon answers; anything that waits, follows logs or starts daemons runs here
SERVED = {"submit"}
LOCAL_FLAGS = {"--wait", "-W", "--help", "-h"}
BUSY_FOR = 120.0          # seconds of "busy" answers before giving up


VERSION_FLAGS = {"--version", "-V"}


def run() -> None:
    argv = sys.argv[1:]
    if argv[:1] and argv[0] in VERSION_FLAGS:       # answered here, before any command's module loads
        sys.stdout.write(version_line() + "\n")
        sys.exit(0)
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
    if argv[0] == "submit":
        from .stdin_script import reads_stdin

        if reads_stdin(head[1:], argv[argv.index("--") + 1:] if "--" in argv else None):
            return False   # a script on stdin: the daemon cannot read this process's stdin
    from .config_file import backend_of

    return backend_of() == "local"


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

    from .job_file import sent_files

    cwd = os.getcwd()
    head = argv[1: argv.index("--")] if "--" in argv else argv[1:]
    # the job file or script, read here with this user's rights: the daemon opens none for its callers
    body = {"argv": argv, "cwd": cwd, "env": dict(os.environ), "files": sent_files(head, cwd)}
    request = json.dumps({"v": 1, "method": "POST", "path": "/cli/submit", "body": body}).encode() + b"\n"
    busy_since = None
    home = home_from_env()
    while True:
        # the environment goes only to a daemon of the queue's owner, never to whoever took its socket's name
        answer = exchange(address(home), request, owner=owner_uid(home), waiting=_say_waiting)
        if answer is None:
            return None
        answered = answer.get("body")
        if answer.get("status") == 503:
            why = answered.get("why") if isinstance(answered, dict) else None
            now = time.monotonic()
            if busy_since is None:
                busy_since = now
                sys.stderr.write(f"gqa: the queue daemon is busy; retrying{f' ({why})' if why else ''}\n")
            if now - busy_since < BUSY_FOR:
                delay = (answered if isinstance(answered, dict) else {}).get("retry_after") or 0.05
                time.sleep(float(delay) * (0.5 + random.random()))
                continue
            return _failed(f"the queue daemon stayed busy for {now - busy_since:.0f} s"
                           f"{f': {why}' if why else ''}; nothing was submitted, try again later")
        if answer.get("status") == 200 and isinstance(answered, dict) and "code" in answered:
            return answered
        message = (answered.get("error") if isinstance(answered, dict) else None) or \
            "the queue daemon gave an unexpected answer"
        if answer.get("status") in (502, 504) and isinstance(answered, dict) and "unread" in answered:
            # the request was sent: only one the daemon never read is known not to be recorded
            message += ("; nothing was submitted" if answered["unread"] else
                        "; the job may have been submitted: check `gqa queue` before submitting again")
        return _failed(message, code=2 if answer.get("status") in (400, 403, 413) else 1)


def _failed(message: str, code: int = 1) -> dict:
    return {"code": code, "stdout": "", "stderr": f"gqa: error: {message}\n"}


def _say_waiting(pid: int | None, seconds: float) -> None:
    """Said once, early, while the daemon keeps a submission waiting."""
    sys.stderr.write(f"gqa: waiting for {daemon_named(pid)}, which has not answered for {seconds:.0f} s"
                     f"{if_stopped(pid) or f'; waiting up to {daemon_socket.REPLY_TIMEOUT:g} s'}\n")
    sys.stderr.flush()
