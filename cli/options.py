"""Options shared by several commands, and how every boolean option reads in --help."""

from typing import Annotated, Any

import typer

Output = Annotated[str, typer.Option("--output", "-o", help="Output format: table or json.",
                                     case_sensitive=False)]


def _job_ids(incomplete: str) -> list[str]:
    """A shell's completion of a job id (cli/completion.py), loaded only when one is asked for."""
    from .completion import job_ids

    return job_ids(incomplete)


JobRefs = Annotated[list[str], typer.Argument(help="Job ids, or array/sweep ids for all their jobs.",
                                              show_default=False, autocompletion=_job_ids)]
JobRef = Annotated[str, typer.Argument(help="A job id, or an array/sweep id.", show_default=False,
                                       autocompletion=_job_ids)]


def check_output(fmt: str, formats: tuple[str, ...] = ("table", "json")) -> str:
    """The format asked for, if this command writes it (`gqa history` adds csv)."""
    fmt = fmt.lower()
    if fmt not in formats:
        from .output import fail
        fail(f"unknown output format {fmt!r}; use {', '.join(formats[:-1])} or {formats[-1]}")
    return fmt


def plain_flags(command: Any, help_names: list[str] | None = None) -> Any:
    """`command` and all its subcommands with each boolean option read as the
    flag it is: `--explain`, not `--explain / --no-explain`, `<bool>` or
    `[default: False]`. An option off by default needs no `--no-` form; one
    whose default is None keeps both (`--stop-at-budget/--no-stop-at-budget`:
    set, unset, or left as it was). One place for every command, so a new
    flag reads the same without anyone remembering to say so."""
    help_names = help_names or list((getattr(command, "context_settings", None) or {}).get("help_option_names", []))
    flags = [p for p in command.params if getattr(p, "is_bool_flag", False)]
    if help_names:
        # --help is a flag too; click makes it when help is asked for, and keeps that one
        context = command.context_class(command, help_option_names=help_names)
        flags += [option] if (option := command.get_help_option(context)) is not None else []
    for option in flags:
        if option.secondary_opts and option.default is False:
            option.secondary_opts = []
        option.metavar = ""          # no `<bool>`: a flag takes no value
        option.show_default = False
    for sub in getattr(command, "commands", {}).values():
        plain_flags(sub, help_names)
    return command
