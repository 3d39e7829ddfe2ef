"""benchmarks/aws_warm_pass.py: its runs on moto, and its refusals."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "aws_warm_pass.py"
pytestmark = [pytest.mark.aws, pytest.mark.slow]


def test_warm_passes_each_start_the_job_a_settlement_frees_a_gpu_for():
    done = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "150", "--passes", "3", "-o", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads(done.stdout)["rows"]
    assert row["queued"] == 150 and row["passes"] == 3 and row["started"] == 3
    assert row["pass_ms"] > 0 and row["cpu_s"] > 0


def test_a_revision_beside_gives_its_medians_and_whether_it_started_the_same_jobs():
    done = subprocess.run([sys.executable, str(SCRIPT), "--sizes", "60", "--passes", "2", "--against", "HEAD",
                           "-o", "json"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads(done.stdout)["rows"]
    assert row["against_pass_ms"] > 0 and row["against_cpu_s"] > 0
    unchanged = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "gqa", "lambdas", "tests",
                                "benchmarks"],
                               timeout=60).returncode == 0
    assert row["same_starts"] or not unchanged   # the same starts, unless those have changes not committed


@pytest.mark.parametrize("args, said", [
    (["--passes", "0"], "--passes from 1 to 100"),
    (["--sizes", "ten"], "--sizes takes whole numbers"),
    (["--against", "no-such-revision"], "cannot read revision no-such-revision"),
])
def test_bad_arguments_exit_2_with_a_message(args, said):
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and said in done.stderr
