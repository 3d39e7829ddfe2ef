"""`gqa completion bash|zsh|fish`: the script that makes a shell complete gqa's
commands, options and, on the local queue, the ids of unfinished jobs.

The script calls `gqa` itself with _GQA_COMPLETE set (click's protocol, as
typer writes it): gqa answers with the candidates and runs nothing, so a
completion costs one start of the CLI (about 0.2 s) and, for a job id, one
read of the local queue's database, given up after LOCK_WAIT."""

import os
from typing import Annotated

import typer

from .app import app
from .output import fail

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_GQA_COMPLETE"
# where each shell looks for a completion script on its own, for the help text
WHERE = {"bash": "~/.local/share/bash-completion/completions/gqa",
         "zsh": "a directory on $fpath, as _gqa",
         "fish": "~/.config/fish/completions/gqa.fish"}
LOCK_WAIT = 0.3          # seconds: a completion never waits on the daemon's writes for long
LISTED = 5000            # unfinished jobs read for their ids at most (oldest first)
OFFERED = 200            # candidates a shell is given at most


@app.command("completion")
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh or fish.", show_default=False)],
):
    """Print the shell's completion script for gqa: commands, options, job ids.

    bash: gqa completion bash > ~/.local/share/bash-completion/completions/gqa
    zsh:  gqa completion zsh > "${fpath[1]}/_gqa"
    fish: gqa completion fish > ~/.config/fish/completions/gqa.fish
    """
    if shell not in SHELLS:
        fail(f"no completion for {shell!r}; gqa writes it for {', '.join(SHELLS)}")
    from typer.completion import get_completion_script

    typer.echo(get_completion_script(prog_name="gqa", complete_var=COMPLETE_VAR, shell=shell))


def prepare() -> None:
    """Before the command runs: when a shell asks for candidates, register
    the shells' answer formats with click (typer does so only where its own
    --install-completion option is on, and gqa keeps that off)."""
    if os.environ.get(COMPLETE_VAR):
        from typer.completion import completion_init

        completion_init()


def job_ids(incomplete: str) -> list[str]:
    """Ids of the local queue's unfinished jobs that start with `incomplete`:
    an array's id (and its tasks, once `GROUP_` is typed) and single jobs.
    None on the AWS backend (a round trip per key press) or a shared box's
    queue (its database is the daemon's), nor when the database is busy."""
    from gqa.adapters.local.paths import StatePaths
    from gqa.adapters.local.system import is_system, state_home
    from gqa.models.errors import GqaError
    from gqa.models.job import PENDING, JobState

    from .config_file import backend_of

    home = state_home()
    if backend_of() != "local" or is_system(home) or not StatePaths(home).db.exists():
        return []
    try:
        from gqa.adapters.local.store import SqliteStore

        store = SqliteStore(StatePaths(home).db, lock_timeout=LOCK_WAIT)
        jobs = store.list([*PENDING, JobState.STARTING, JobState.RUNNING], limit=LISTED)
    except (GqaError, OSError):
        return []
    if "_" in incomplete:
        ids = [j.id for j in jobs]
    else:
        ids = list(dict.fromkeys(j.group for j in jobs))
    return [i for i in ids if i.startswith(incomplete)][:OFFERED]
