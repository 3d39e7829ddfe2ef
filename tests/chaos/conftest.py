"""Fixtures of the chaos suite (the harness is harness.py); the figures of
every scenario are printed at the end of the run."""

import json

import pytest

from .harness import FIGURES, Chaos


@pytest.fixture
def make_chaos(tmp_path):
    made: list[Chaos] = []

    def make(**kw) -> Chaos:
        chaos = Chaos(tmp_path / f"q{len(made)}", **kw)
        made.append(chaos)
        return chaos

    try:
        yield make
    finally:
        for chaos in made:
            chaos.close()


@pytest.fixture
def chaos(make_chaos) -> Chaos:
    return make_chaos()


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    terminalreporter.section("chaos figures")
    keys = ["scenario", "jobs", "kills", "lost", "twice", "stuck", "tracebacks"]
    terminalreporter.write_line("  ".join(f"{k:>10}" if k != "scenario" else f"{k:<34}" for k in keys) + "  extra")
    for row in FIGURES:
        cells = [f"{row[k]:<34}" if k == "scenario" else f"{row[k]:>10}" for k in keys]
        terminalreporter.write_line("  ".join(cells) + "  " + json.dumps(row["extra"]))
