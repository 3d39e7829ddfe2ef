"""`gqa demo`: the whole story in under a minute on 4 virtual GPUs."""

from typing import Annotated

import typer

from .app import app


@app.command("demo")
def demo(
    keep: Annotated[bool, typer.Option("--keep", help="Keep the demo's state directory and print its path.")] = False,
):
    """Run the demo scenarios on a temporary queue with 4 virtual GPUs."""
    from .demo_run import run_demo

    raise typer.Exit(run_demo(keep=keep))
