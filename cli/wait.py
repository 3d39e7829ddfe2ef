"""`gqa wait ID...`: block until jobs already queued end, as `gqa submit --wait`
does for the jobs it queues (cli/waiting.py)."""

from typing import Annotated, Optional

import typer

from .app import app
from .options import JobRefs, Output, check_output
from .output import fail, note, print_json, user_errors


@app.command("wait")
def wait(
    refs: JobRefs,
    timeout: Annotated[Optional[str], typer.Option(
        "--timeout", help="Give up after this long (90, 90s, 30m, 4h) and exit 124.", show_default=False)] = None,
    output: Output = "table",
):
    """Wait until jobs end. Exit 0 if all completed, 1 if any did not, 124 at --timeout.

    Shows one progress line (done, running, pending, time waited), updated in place on a terminal.
    """
    fmt = check_output(output)
    limit = _seconds(timeout) if timeout is not None else None
    from .waiting import Progress, tell, wait_all

    progress = Progress()
    try:
        with user_errors():
            waited = wait_all(refs, timeout=limit, progress=progress)
    except KeyboardInterrupt:
        progress.end()
        raise typer.Exit(130) from None
    progress.end()
    if fmt == "json":
        from collections import Counter

        print_json({"jobs": waited.final(), "counts": dict(Counter(j.status.value for j in waited.jobs)),
                    "timed_out": waited.timed_out, "waited": round(waited.seconds, 1)})
    elif not waited.timed_out:
        tell(waited.jobs)
    if waited.timed_out:
        from gqa.models.units import format_duration

        left = sum(not j.state.terminal for j in waited.jobs)
        unseen = f"; {', '.join(waited.admitting)} not admitted yet" if waited.admitting else ""
        note(f"gqa: error: timed out after {format_duration(waited.seconds)}: {left} of {len(waited.jobs)} "
             f"jobs had not ended{unseen}")
    raise typer.Exit(waited.code)


def _seconds(text: str) -> float:
    from gqa.models.errors import SpecError
    from gqa.models.units import parse_duration

    try:
        return float(parse_duration(text, bare_unit="s"))     # a bare number is seconds, as timeout(1) reads it
    except SpecError as exc:
        fail(f"--timeout: {exc}")
