"""Fixtures of the chaos suite (the harness is harness.py); the figures of
every scenario travel with its test's report (tests/conftest.py prints them at
the end of the run, whichever process ran the test)."""

import pytest

from .harness import FIGURE_PROPERTY, FIGURES, Chaos


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and FIGURES:
        report.user_properties.extend((FIGURE_PROPERTY, row) for row in FIGURES)
        FIGURES.clear()
