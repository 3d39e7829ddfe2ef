"""Shared test setup: the repository root is importable, so every suite says
`from tests.builders import ...`."""

import sys
from pathlib import Path

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
