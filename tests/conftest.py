"""Shared test setup: the repository root is importable, so every suite says
`from tests.builders import ...`."""

import os
import sys
from pathlib import Path

# jsii (the CDK's bridge to Node.js) prints a banner on every start under Node 20
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def no_user_config(tmp_path_factory, monkeypatch):
    """Tests never read the developer's `gqa config`: each starts on the local
    backend, with no profile chosen, unless it sets one up itself."""
    monkeypatch.setenv("GQA_CONFIG", str(tmp_path_factory.mktemp("gqa-config") / "config"))
    for name in ("GQA_BACKEND", "GQA_PROFILE", "GQA_API_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True, scope="session")
def no_cgroups_left_behind():
    """Daemons the tests kill with SIGKILL leave their jobs' cgroups behind (a
    daemon stopped normally removes its own): the session removes the empty
    ones it made, so runs on one machine do not pile them up."""
    from gqa.adapters.local import containment

    def roots() -> set[Path]:
        # where daemons started by the tests put them: gqa-* below this process's cgroup (only read here)
        try:
            mount = containment.cgroup2_mount(Path("/proc/self/mountinfo").read_text())
            own = containment.own_cgroup(Path("/proc/self/cgroup").read_text())
        except OSError:
            return set()
        if mount is None or own is None or mount[1] != "/":
            return set()
        return set(Path(mount[0] + own.rstrip("/")).glob("gqa-*"))

    before = roots()
    yield
    for root in roots() - before:
        for cell in [p for p in root.iterdir() if p.is_dir()] + [root]:
            try:
                cell.rmdir()
            except OSError:   # still holds processes, or not a cgroup of ours
                pass
