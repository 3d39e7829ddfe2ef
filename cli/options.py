"""Options shared by several commands."""

from typing import Annotated

import typer

Output = Annotated[str, typer.Option("--output", "-o", help="Output format: table or json.",
                                     case_sensitive=False)]
JobRefs = Annotated[list[str], typer.Argument(help="Job ids, or array/sweep ids for all their jobs.",
                                              show_default=False)]
JobRef = Annotated[str, typer.Argument(help="A job id, or an array/sweep id.", show_default=False)]


def check_output(fmt: str) -> str:
    fmt = fmt.lower()
    if fmt not in ("table", "json"):
        from .output import fail
        fail(f"unknown output format {fmt!r}; use table or json")
    return fmt
