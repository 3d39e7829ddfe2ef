"""Shared test setup: makes `tests/` importable so every suite can say
`from builders import ...`."""

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
