"""`gqa deny ID... [--reason TEXT]`: reject jobs that wait for approval."""

from typing import Annotated

import typer

from .app import app
from .approve import _me
from .context import caller_user
from .options import JobRefs, Output, check_output
from .output import print_results, user_errors


@app.command("deny")
def deny(refs: JobRefs, reason: Annotated[str, typer.Option("--reason", "-r", help="Why, for the owner.")] = "",
         output: Output = "table"):
    """Reject jobs awaiting approval; they end as REJECTED with your reason."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().deny(refs, caller=caller_user() or _me(), reason=reason)
    print_results(results, fmt)
