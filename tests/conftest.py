"""Shared test setup: the repository root is importable, so every suite says
`from tests.builders import ...`."""

import json
import os
import sys
from pathlib import Path

# jsii (the CDK's bridge to Node.js) prints a banner on every start under Node 20
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# the sbatch input variables of the shell the suite runs in are dropped: SBATCH_TIMELIMIT would change what
# every submission asks for (the CLI keeps the environment it started with, so before it is imported)
for _name in [n for n in os.environ if n.startswith("SBATCH_")]:
    del os.environ[_name]

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


import pytest  # noqa: E402


def pytest_configure(config):
    """moto answers DynamoDB's requests the same, faster (tests/aws/lean_moto.py).

    Each `mock_aws()` would also drop boto3's default session, so the first
    `boto3.client()` of every test (a Lambda container's, built per test)
    loaded every service model again: about 0.4 s a test for the api's 15
    clients. The session is kept instead (moto's `reset_boto3_session`): its
    clients still reach moto, whose handler every session made after moto's
    import carries, and its credentials are moto's fake ones in every test."""
    from moto.core.config import default_user_config

    from tests.aws.lean_moto import lean_everywhere

    lean_everywhere()
    default_user_config["core"]["reset_boto3_session"] = False


@pytest.fixture(autouse=True)
def no_user_config(tmp_path_factory, monkeypatch):
    """Tests never read the developer's `gqa config`: each starts on the local
    backend, with no profile chosen, unless it sets one up itself."""
    monkeypatch.setenv("GQA_CONFIG", str(tmp_path_factory.mktemp("gqa-config") / "config"))
    for name in ("GQA_BACKEND", "GQA_PROFILE", "GQA_API_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (`make test`): a worker per core the run may use, at most 8.
    With two per core, a few tests that race the wall clock (the stand-in API
    Gateway's 29 s, a pty's first frame) lost on a loaded machine.
    PYTEST_XDIST_AUTO_NUM_WORKERS overrides this; `-n 0` runs in this process."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cores))


def _in_worker(config) -> bool:
    """True in a pytest-xdist worker (the run is split between several processes)."""
    return hasattr(config, "workerinput")


def _test_cgroups() -> set[Path]:
    """Where daemons started by the tests put their cgroups: gqa-* below this
    process's cgroup (only read here)."""
    from gqa.adapters.local import containment

    try:
        mount = containment.cgroup2_mount(Path("/proc/self/mountinfo").read_text())
        own = containment.own_cgroup(Path("/proc/self/cgroup").read_text())
    except OSError:
        return set()
    if mount is None or own is None or mount[1] != "/":
        return set()
    return set(Path(mount[0] + own.rstrip("/")).glob("gqa-*"))


_CGROUPS_BEFORE = pytest.StashKey[set[Path]]()


def pytest_sessionstart(session):
    if not _in_worker(session.config):
        session.config.stash[_CGROUPS_BEFORE] = _test_cgroups()


def pytest_sessionfinish(session):
    """Daemons the tests kill with SIGKILL leave their jobs' cgroups behind (a
    daemon stopped normally removes its own): the run removes the empty ones
    it made, so runs on one machine do not pile them up. Only the process that
    started the run does it, once every test is over: a worker that finished
    early would otherwise remove the still empty cgroup of a daemon another
    worker's test has just started."""
    if _in_worker(session.config) or _CGROUPS_BEFORE not in session.config.stash:
        return
    for root in _test_cgroups() - session.config.stash[_CGROUPS_BEFORE]:
        for cell in [p for p in root.iterdir() if p.is_dir()] + [root]:
            try:
                cell.rmdir()
            except OSError:   # still holds processes, or not a cgroup of ours
                pass


# -- the chaos suite's figures ---------------------------------------------------------------------
# Each scenario's row comes with its test's report (tests/chaos/conftest.py), also from a worker.
_FIGURES: list[dict] = []


def pytest_runtest_logreport(report):
    from tests.chaos.harness import FIGURE_PROPERTY

    _FIGURES.extend(value for name, value in report.user_properties if name == FIGURE_PROPERTY)


def pytest_terminal_summary(terminalreporter):
    if not _FIGURES:
        return
    terminalreporter.section("chaos figures")
    keys = ["scenario", "jobs", "kills", "lost", "twice", "stuck", "tracebacks"]
    terminalreporter.write_line("  ".join(f"{k:>10}" if k != "scenario" else f"{k:<34}" for k in keys) + "  extra")
    for row in _FIGURES:
        cells = [f"{row[k]:<34}" if k == "scenario" else f"{row[k]:>10}" for k in keys]
        terminalreporter.write_line("  ".join(cells) + "  " + json.dumps(row["extra"]))
