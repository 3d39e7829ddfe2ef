"""`gqa hold ID...`: keep pending jobs from starting until `gqa release`
(Slurm's `scontrol hold`); whole arrays by their id."""

import sys

from .app import app
from .options import JobRefs, Output, check_output
from .output import SUMMARISED_OVER, print_results, summarised, user_errors

__all__ = ["SUMMARISED_OVER", "hold", "print_actions"]


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
    lines = summarised(results, line=lambda r: f"job {r.job.id} {r.action}")
    sys.stdout.write("".join(f"{line}\n" for line in lines))
