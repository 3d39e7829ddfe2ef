"""Whether `gqa submit` takes its batch script from standard input, as
sbatch does (`gqa submit <<EOF`, `gqa submit - < run.sh`): its argument is
`-`, or it names neither a file nor a command after `--` and stdin is not a
terminal. Standard library only: the light client (cli/client.py) asks it
before handing a submission to the daemon, which cannot read the caller's
stdin."""

import sys

# `gqa submit`'s options that take no value (cli/submit.py); every other option takes one
FLAGS = frozenset({"--shell", "--no-code", "--wait", "-W", "--hold", "--exclusive", "--help", "-h"})


def file_argument(args: list[str]) -> str | None:
    """The FILE among `gqa submit`'s arguments (before any `--`), None if none is given."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "-" or not arg.startswith("-"):
            return arg
        elif arg.startswith("--"):
            skip = "=" not in arg and arg not in FLAGS
        else:   # -G2 holds its value; -G takes the next argument
            skip = len(arg) == 2 and arg not in FLAGS
    return None


def reads_stdin(args: list[str], command: list[str] | None) -> bool:
    """`args`: the submit command's arguments before `--`; `command`: what follows `--` (None: no `--`)."""
    file = file_argument(args)
    if file == "-":
        return True
    if file is not None or command is not None:
        return False
    try:
        return sys.stdin is not None and not sys.stdin.isatty()
    except (OSError, ValueError):   # a closed stdin
        return False


def read_script(limit: int) -> bytes:
    """The script on stdin: at most `limit` + 1 bytes, so a larger one is
    refused unread past that. OSError where stdin cannot be read."""
    if sys.stdin is None:
        return b""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:   # a text-only stream
        return sys.stdin.read(limit + 1).encode("utf-8", "surrogateescape")
    return stream.read(limit + 1)
