"""`gqa cancel ID...`: stop jobs, queued or running (whole arrays by their id)."""

import sys
from collections import Counter

from .app import app
from .options import JobRefs, Output, check_output
from .output import print_results, user_errors

SUMMARISED_OVER = 20   # a group with more jobs than this prints one line, not one per job (100,000 would scroll)


@app.command("cancel")
def cancel(refs: JobRefs, output: Output = "table"):
    """Cancel jobs. Running ones get SIGTERM, a grace period, then SIGKILL, group-wide."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().cancel(refs)
    if fmt == "json":              # every job, however many
        print_results(results, fmt)
        return
    sys.stdout.write("".join(f"{line}\n" for line in summarised(results)))


def summarised(results) -> list[str]:
    """A line per job, but one per group for a group of more than SUMMARISED_OVER
    jobs: `array 12: 99,990 cancelled, 8 cancelling (stopping its processes)`."""
    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(r.job.group, []).append(r)
    lines = []
    for group, members in groups.items():
        if len(members) <= SUMMARISED_OVER:
            lines += [f"{r.action} {r.job.id}" + (f" ({r.detail})" if r.detail else "") for r in members]
            continue
        counts = Counter((r.action, r.detail) for r in members)
        lines.append(f"array {group}: " + ", ".join(f"{n:,} {action}" + (f" ({detail})" if detail else "")
                                                    for (action, detail), n in counts.items()))
    return lines
