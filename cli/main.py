"""`gqa`: the entry point. It loads every command's module, each of which
registers its command on the app (cli/app.py), and runs the app."""

import os
import sys

from .context import remember_environment  # noqa: E402

remember_environment()  # what jobs inherit: the user's environment, not our tweaks below
# pydantic looks for plugins through importlib.metadata on first use (~20 ms); the CLI needs none
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from .app import app  # noqa: E402
from .context import PROFILE, TRAILING_COMMAND  # noqa: E402

# registered as they load, so `gqa --help` lists the commands in this order (command groups last)
from . import submit, queue, status, history, wait, logs, cancel, requeue, hold, release, update, approve, deny  # noqa: E402, F401
from . import quota, local, local_price, trigger, demo, simulate, cost, report, top, ui, whoami, completion, config  # noqa: E402, F401


def main(argv: list[str] | None = None) -> int:
    args, command = split_trailing_command(list(sys.argv[1:] if argv is None else argv))
    token = TRAILING_COMMAND.set(command)
    profile = PROFILE.set(None)
    import typer

    try:
        # not standalone: a usage mistake is gqa's one line on stderr, not a usage text and a boxed message
        result = gqa_command().main(args=args, prog_name="gqa", standalone_mode=False)
    except typer.TyperException as exc:      # click's usage errors (an unknown option, a missing argument)
        ctx, message = getattr(exc, "ctx", None), exc.format_message()
        if message:       # none where the help was printed instead (a group given no command)
            where = f" (`{ctx.command_path} -h` for help)" if ctx is not None else ""
            sys.stderr.write(f"gqa: error: {message}{where}\n")
        return int(getattr(exc, "exit_code", 2))
    except typer.Abort:          # Ctrl-C at a prompt
        sys.stderr.write("\n")
        return 130
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        PROFILE.reset(profile)
        TRAILING_COMMAND.reset(token)
    return result if isinstance(result, int) else 0


# the commands that take a command after `--` (cli/context.py); for the others `--` ends the options, as usual
TAKES_A_COMMAND = {"submit"}


def split_trailing_command(args: list[str]) -> tuple[list[str], list[str] | None]:
    """`gqa submit ... -- CMD ARGS...`: the arguments to parse and the job's
    command, verbatim (None: no `--`). Any other command keeps its `--`, so
    `gqa cancel 1 -- 2` cancels both and `gqa whoami -- x` is refused."""
    if "--" not in args or command_name(args) not in TAKES_A_COMMAND:
        return args, None
    cut = args.index("--")
    return args[:cut], args[cut + 1:]


def command_name(args: list[str]) -> str | None:
    """The command `args` run: the first word that is not gqa's own option
    (--profile P, -V, -h) nor its value; None when `--` or the end comes first."""
    words = iter(args)
    for word in words:
        if word == "--":
            return None
        if word == "--profile":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def gqa_command():
    """The click command the app's commands make, each boolean option shown as a flag (cli/options.py)."""
    import typer.main

    from .completion import prepare
    from .options import plain_flags

    prepare()
    return plain_flags(typer.main.get_command(app))


def run() -> None:  # console script
    sys.exit(main())


if __name__ == "__main__":
    run()
