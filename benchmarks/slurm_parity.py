"""Slurm scripts, unchanged, on gqa and on Slurm side by side.

Runs the corpus of realistic Slurm scripts (tests/slurm_corpus/: an array
sweep, a DDP launch through srun, a CPU-only step chained by dependencies to
training and a report, a failing srun step) through `gqa submit` and through
`sbatch` on a running single-node Slurm, each in its own copy of the
project, and compares what the scripts wrote: every file under results/ and
logs/ (job ids and the host name normalised), and each job's end. Then the
time from the first submission to the last job's end, as a ratio.

    python benchmarks/slurm_parity.py              # gqa and Slurm (skipped with a message when absent)
    python benchmarks/slurm_parity.py --peers none # gqa alone: what the corpus writes

Known, deliberate differences are listed as such, not as failures:
OMP_NUM_THREADS is set from the CPUs asked for (as Slurm sites do in a task
prolog; stock Slurm leaves it unset), and a failed srun step fails the job
(Slurm ends the batch job COMPLETED when its script exits 0).
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import Gqa, Slurm, Unavailable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NODE_CPUS = 8        # what the peer's Slurm node declares (peers/slurm setup: NODE_CPUS)
CORPUS = ROOT / "tests" / "slurm_corpus"

# (script, Slurm-style dependency on an earlier step: (kind, step name) or None)
WORKLOAD = [("lr_sweep.sh", None), ("ddp_train.sh", None), ("preprocess.sh", None),
            ("train.sh", ("afterok", "preprocess.sh")), ("report.sh", ("afterany", "train.sh")),
            ("step_fails.sh", None)]
BY_DESIGN = {
    "results/prep.txt": "OMP_NUM_THREADS is set from --cpus-per-task (stock Slurm leaves it unset)",
    "end of step_fails.sh": "a failed srun step fails the job (stock Slurm: COMPLETED, as its script exits 0)",
}


def run(argv: list[str], env: dict | None = None, cwd: Path | None = None, timeout: float = 60) -> str:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return proc.stdout


class GqaLikeTheNode(Gqa):
    """gqa declaring the CPUs the Slurm node declares (8), as an administrator would."""

    def start(self) -> None:
        run([self.cli, "local", "start", "--gpus", str(self.gpus), "--cpus", str(NODE_CPUS), "--detach"],
            env=self.env)


def submit_all(queue, project: Path) -> dict[str, str]:
    """Submits the workload in order, from the project directory; the job id of each script."""
    ids: dict[str, str] = {}
    for script, after in WORKLOAD:
        extra = [f"--dependency={after[0]}:{ids[after[1]]}"] if after else []
        if isinstance(queue, Slurm):
            out = run(["sbatch", "--parsable", "--account=teamA", *extra, script], cwd=project)
        else:
            out = run([queue.cli, "submit", *extra, script], env=queue.env, cwd=project)
        ids[script] = queue.job_id(out)
    return ids


def collected(project: Path, ids: dict[str, str]) -> dict[str, str]:
    """Every file the scripts wrote, with job ids and the host name replaced by their roles."""
    out = {}
    names = {job: script.removesuffix(".sh") for script, job in ids.items()}
    host = socket.gethostname()
    for folder in ("results", "logs", "."):
        for path in sorted((project / folder).glob("*")):
            if not path.is_file() or (folder == "." and path.suffix != ".out"):
                continue
            # a job id in a file name follows a '-' (%x-%j, %x-%A_%a, slurm-%j): replaced by its script
            key = re.sub(r"(?<=-)([0-9]+)(?=[_.])", lambda m: "{" + names.get(m.group(1), "?") + "}",
                         f"{folder}/{path.name}".removeprefix("./"))
            text = path.read_text(errors="replace").replace(host, "HOST").replace("localhost", "HOST")
            out[key] = text
    return out


def ends(queue, ids: dict[str, str]) -> dict[str, str]:
    if isinstance(queue, Slurm):
        states = {}
        for script, job in ids.items():
            line = run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], timeout=30).split()
            states[f"end of {script}"] = ",".join(sorted(set(s.replace("COMPLETED", "SUCCEEDED") for s in line)))
        return states
    records = {r.id: r for r in queue.records()}
    out = {}
    for script, job in ids.items():
        tasks = [r for r in records.values() if r.group == job]
        out[f"end of {script}"] = ",".join(sorted({r.state.value for r in tasks}))
    return out


def measure(queue, workdir: Path, say) -> dict:
    project = workdir / f"project-{queue.name}"
    shutil.copytree(CORPUS, project)
    for folder in ("results", "logs"):
        (project / folder).mkdir()
    queue.start()
    try:
        t0 = time.time()
        ids = submit_all(queue, project)
        ended = queue.wait_idle(timeout=600)
        elapsed = max(ended, time.time() if isinstance(queue, Slurm) else ended) - t0
        files = collected(project, ids) | ends(queue, ids)
    finally:
        queue.stop()
    say(f"{queue.label}: {len(ids)} scripts, {len(files)} outputs, first submit -> last end {elapsed:.2f} s")
    if not isinstance(queue, Slurm):
        for r in sorted(queue.records(), key=lambda r: r.seq):
            start = r.first_start
            say(f"  {r.id:>6} {r.name:<14} submitted +{r.submitted_at - t0:5.2f} s, started "
                f"+{(start or t0) - t0:5.2f} s, ended +{(r.ended_at or t0) - t0:5.2f} s ({r.reason})")
    return {"files": files, "elapsed": elapsed, "label": queue.label}


def compare(gqa: dict, slurm: dict) -> tuple[list[str], list[str], list[str]]:
    same, by_design, differ = [], [], []
    for key in sorted(set(gqa["files"]) | set(slurm["files"])):
        a, b = gqa["files"].get(key), slurm["files"].get(key)
        if a == b:
            same.append(key)
        elif key in BY_DESIGN:
            by_design.append(f"{key}: {BY_DESIGN[key]}")
        else:
            differ.append(f"{key}:\n    gqa:   {a!r}\n    slurm: {b!r}")
    return same, by_design, differ


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peers", default="auto", help="auto (Slurm when it runs here) or none")
    args = p.parse_args()
    say = print
    with tempfile.TemporaryDirectory(prefix="gqa-parity-") as tmp:
        workdir = Path(tmp)
        results = {"gqa": measure(GqaLikeTheNode(workdir / "gqa-home", 4), workdir, say)}
        if args.peers != "none":
            try:
                results["slurm"] = measure(Slurm(workdir / "slurm", 4), workdir, say)
            except Unavailable as exc:
                say(f"skipping slurm: {exc}")
        if "slurm" not in results:
            for key, text in sorted(results["gqa"]["files"].items()):
                say(f"  {key}: {text.strip()[:100]!r}")
            return 0
        same, by_design, differ = compare(results["gqa"], results["slurm"])
        total = len(same) + len(by_design) + len(differ)
        say(f"outputs identical to Slurm's: {len(same)} of {total}; different by design: {len(by_design)}; "
            f"different: {len(differ)}")
        for line in by_design:
            say(f"  by design: {line}")
        for line in differ:
            say(f"  DIFFERENT {line}")
        ratio = results["gqa"]["elapsed"] / results["slurm"]["elapsed"]
        say(f"first submit -> last end: gqa {results['gqa']['elapsed']:.2f} s, {results['slurm']['label']} "
            f"{results['slurm']['elapsed']:.2f} s; gqa takes {ratio:.2f}x Slurm's time")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
