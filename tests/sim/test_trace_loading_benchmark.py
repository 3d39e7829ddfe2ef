"""benchmarks/trace_loading.py: the same jobs written as a Slurm dump and as the generic CSV read back
the same, each in a process of its own."""

import json
import subprocess
import sys
from pathlib import Path

from gqa.sim.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from trace_loading import write_both  # noqa: E402


def test_both_files_hold_the_same_jobs(tmp_path):
    dump, table = write_both(tmp_path, 300)
    a, b = load_trace(dump), load_trace(table)
    assert (a.format, b.format) == ("sacct", "csv")
    assert [(j.id, j.submit_time, j.duration, j.gpus, j.team, j.priority, j.wall_time, j.user, j.name)
            for j in a.jobs] == \
        [(j.id, j.submit_time, j.duration, j.gpus, j.team, j.priority, j.wall_time, j.user, j.name) for j in b.jobs]


def test_the_benchmark_reports_both_formats_and_their_ratio():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "trace_loading.py"), "--jobs", "400",
                           "--rounds", "1", "-o", "json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {f: row["jobs"] for f, row in out["formats"].items()} == {"sacct": 400, "csv": 400}
    assert out["ratio"] == out["formats"]["sacct"]["cpu_s"] / out["formats"]["csv"]["cpu_s"]
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "trace_loading.py"), "--jobs", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--jobs and --rounds must be at least 1" in bad.stderr
