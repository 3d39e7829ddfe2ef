"""benchmarks/replay_backlog.py: a replay with a long queue, each policy in its own process, against a
revision side by side, on a small trace in the Alibaba format."""

import json
import subprocess
import sys
from pathlib import Path

from tests.sim.test_eta_error_sources_benchmark import bursty_trace

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "replay_backlog.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_a_backlog_replays_against_a_revision_with_the_same_decisions(tmp_path):
    bursty_trace(tmp_path, bursts=10, size=30)
    done = run("--traces", str(tmp_path), "--trace", "alibaba", "--gpus", "4", "--load", "3",
               "--policies", "fifo-easy,gqa", "--against", "HEAD", "-o", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["trace"], out["gpus"], out["load"], out["against"]) == ("alibaba", 4, 3.0, "HEAD")
    rows = {r["policy"]: r for r in out["rows"]}
    assert list(rows) == ["fifo-easy", "gqa"]
    for row in rows.values():
        assert row["jobs"] == 300 and row["most_waiting"] > 100   # 4 GPUs for bursts of 30: a queue
        assert row["same_decisions"] and row["cpu_s"] > 0 and row["against_cpu_s"] > 0 and row["mean_jct_s"] > 0
        assert len(row["schedule"]) == 16 and row["against_passes"] == row["passes"] > 0


def test_bad_input_is_refused_with_a_message(tmp_path):
    bursty_trace(tmp_path)
    for args, words in ((("--policies", "fifo,guess"), "guess"), (("--load", "0"), "--load"),
                        (("--against", "no-such-revision"), "no-such-revision"),
                        (("--trace", "itp"), "no itp trace")):
        done = run("--traces", str(tmp_path), "--trace", "alibaba", *args)
        assert done.returncode == 2 and words in done.stderr and not done.stdout, (args, done.stderr)
