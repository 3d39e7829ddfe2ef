"""The `gqa` command group: its settings and the option every command shares
(--profile). Each command's module registers its command here as it loads;
cli/main.py loads them all, in the order `gqa --help` lists them, and the
daemon loads `gqa submit` alone to parse a light client's argv with the same
options (daemon/submit_command.py)."""

from typing import Annotated, Optional

import typer

from .context import PROFILE

app = typer.Typer(
    name="gqa",
    help="A virtual queue for GPU training jobs: submit, wait your turn fairly, resume after interruptions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def show_version(asked: bool) -> None:
    if asked:
        from .version import version_line

        typer.echo(version_line())
        raise typer.Exit(0)


@app.callback()
def choose_profile(
    profile: Annotated[Optional[str], typer.Option(
        "--profile", help="The `gqa config` profile to use (default: GQA_PROFILE, else 'default').")] = None,
    version: Annotated[bool, typer.Option(
        "--version", "-V", help="Print gqa's version and exit.", callback=show_version, is_eager=True)] = False,
):
    """A virtual queue for GPU training jobs: submit, wait your turn fairly, resume after interruptions."""
    if profile is not None:
        PROFILE.set(profile)
