"""`gqa hold ID...`: keep pending jobs from starting until `gqa release`
(Slurm's `scontrol hold`); whole arrays by their id."""

import sys
from collections import Counter

from .app import app
from .options import JobRefs, Output, check_output
from .output import print_results, user_errors

SUMMARISED_OVER = 20   # a group with more jobs than this prints one line, not one per job


@app.command("hold")
def hold(refs: JobRefs, output: Output = "table"):
    """Hold pending jobs: they keep their place but do not start until released."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        results = backend().control().hold(refs)
    print_actions(results, fmt)


def print_actions(results, fmt: str) -> None:
    """What hold, release and update did: `job 12 held`, a line per job, but
    one per group of more than SUMMARISED_OVER jobs (`array 12: 1,500 held`);
    `-o json` lists every job."""
    if fmt == "json":
        print_results(results, fmt)
        return
    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(r.job.group, []).append(r)
    lines = []
    for group, members in groups.items():
        if len(members) <= SUMMARISED_OVER:
            lines += [f"job {r.job.id} {r.action}" + (f" ({r.detail})" if r.detail else "") for r in members]
            continue
        counts = Counter((r.action, r.detail) for r in members)
        lines.append(f"array {group}: " + ", ".join(f"{n:,} {action}" + (f" ({detail})" if detail else "")
                                                    for (action, detail), n in counts.items()))
    sys.stdout.write("".join(f"{line}\n" for line in lines))
