"""Shared test setup: the repository root is importable, so every suite says
`from tests.builders import ...`."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
