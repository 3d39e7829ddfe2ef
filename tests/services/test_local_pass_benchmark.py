"""benchmarks/local_pass.py: its runs side by side with a revision, and its refusals."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "local_pass.py"
pytestmark = pytest.mark.slow


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def unchanged_since_head(*paths: str) -> bool:
    done = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", *paths], timeout=60)
    return done.returncode == 0


def test_each_size_is_measured_here_and_at_a_revision_with_the_same_starts():
    done = run("--sizes", "40,120", "--passes", "5", "--against", "HEAD", "-o", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["against"] == "HEAD" and out["rounds"] == 1
    assert [row["queued"] for row in out["rows"]] == [40, 120]
    for row in out["rows"]:
        # the first pass and 5 after it; the first always builds its index, a cold start
        assert row["passes"] == 6 and 1 <= row["builds"] <= 6 and row["pass_ms"] > 0 and row["mean_ms"] > 0
        assert row["against_pass_ms"] > 0 and row["against_mean_ms"] > 0 and row["against_builds"] >= 1
        # the same jobs on the same GPUs in the same passes, unless gqa has changes not committed
        assert row["same_starts"] or not unchanged_since_head("gqa", "tests")


def test_text_rows_say_the_pass_and_its_builds():
    done = run("--sizes", "40", "--passes", "3")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("40 queued: a pass ") and " ms (mean " in done.stdout
    assert "of 4 passes built the index" in done.stdout


@pytest.mark.parametrize("args, said", [
    (["--sizes", "ten"], "--sizes takes whole numbers, not 'ten'"),
    (["--sizes", "4"], "--sizes must be at least 8"),
    (["--passes", "0"], "--passes and --rounds at least 1"),
    (["--against", "no-such-revision"], "cannot read revision no-such-revision"),
])
def test_bad_arguments_exit_2_with_a_message(args, said):
    done = run(*args, timeout=120)
    assert done.returncode == 2 and said in done.stderr and done.stdout == ""
