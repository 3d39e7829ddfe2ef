"""benchmarks/array_storage.py: its runs side by side with a revision, and its refusals."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "array_storage.py"
pytestmark = pytest.mark.slow


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def test_each_environment_is_measured_here_and_at_a_revision():
    done = run("--tasks", "400", "--env-kb", "0,10", "--against", "HEAD", "-o", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["against"] == "HEAD" and [row["env_kb"] for row in out["rows"]] == [0, 10]
    for row in out["rows"]:
        assert row["tasks"] == 400
        for figure in ("create_s", "bytes_per_task", "status_s", "get_ms", "change_ms", "cancel_s"):
            assert row[figure] > 0 and row[f"against_{figure}"] > 0
    # the environment kept once: 10 KB more of it adds far less than 10 KB a task
    empty, large = out["rows"]
    assert large["bytes_per_task"] - empty["bytes_per_task"] < 1024


def test_text_rows_say_the_size_and_each_step():
    done = run("--tasks", "200", "--env-kb", "1.5")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("200 tasks, a 1.5 KB environment: ") and " bytes a task), written in " in done.stdout
    assert "all cancelled in " in done.stdout


@pytest.mark.parametrize("args, said", [
    (["--env-kb", "ten"], "--env-kb takes numbers, not 'ten'"),
    (["--tasks", "100"], "--tasks must be at least 200"),
    (["--rounds", "0"], "--rounds at least 1"),
    (["--against", "no-such-revision"], "cannot read revision no-such-revision"),
])
def test_bad_arguments_exit_2_with_a_message(args, said):
    done = run(*args, timeout=120)
    assert done.returncode == 2 and said in done.stderr and done.stdout == ""
