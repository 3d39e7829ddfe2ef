"""`gqa`: the entry point. Commands register here; each lives in its own module."""

import contextvars
import os
import sys

from .context import remember_environment  # noqa: E402

remember_environment()  # what jobs inherit: the user's environment, not our tweaks below
# pydantic looks for plugins through importlib.metadata on first use (~20 ms); the CLI needs none
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer  # noqa: E402

from typing import Annotated, Optional  # noqa: E402

from . import (approve, cancel, config, cost, demo, deny, local, logs, queue, quota, requeue, simulate,  # noqa: E402
               status, submit, trigger, whoami)
from .context import PROFILE  # noqa: E402

# `gqa submit [FILE] [flags] -- CMD ARGS...`: everything after the first `--`
# is the job's command, verbatim, so it is split off before option parsing.
TRAILING_COMMAND: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("gqa_command", default=None)

app = typer.Typer(
    name="gqa",
    help="A virtual queue for GPU training jobs: submit, wait your turn fairly, resume after interruptions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("submit", no_args_is_help=False)(submit.submit)
app.command("queue")(queue.queue)
app.command("status")(status.status)
app.command("logs")(logs.logs)
app.command("cancel")(cancel.cancel)
app.command("requeue")(requeue.requeue)
app.command("approve")(approve.approve)
app.command("deny")(deny.deny)
app.add_typer(quota.app, name="quota")
app.add_typer(local.app, name="local")
app.add_typer(trigger.app, name="trigger")
app.command("demo")(demo.demo)
app.command("simulate")(simulate.simulate)
app.command("cost")(cost.cost)
app.command("whoami")(whoami.whoami)
app.add_typer(config.app, name="config")


@app.callback()
def choose_profile(
    profile: Annotated[Optional[str], typer.Option(
        "--profile", help="The `gqa config` profile to use (default: GQA_PROFILE, else 'default').")] = None,
):
    """A virtual queue for GPU training jobs: submit, wait your turn fairly, resume after interruptions."""
    if profile is not None:
        PROFILE.set(profile)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = None
    if "--" in args:
        cut = args.index("--")
        args, command = args[:cut], args[cut + 1:]
    token = TRAILING_COMMAND.set(command)
    profile = PROFILE.set(None)
    try:
        app(args=args, prog_name="gqa", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        PROFILE.reset(profile)
        TRAILING_COMMAND.reset(token)
    return 0


def run() -> None:  # console script
    sys.exit(main())


if __name__ == "__main__":
    run()
