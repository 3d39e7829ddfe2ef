"""The checks themselves can fail: a runs file that shows a job run twice,
twice at once, or not at all is caught (no daemon needed)."""

import pytest

from .harness import Runs, run_twice

pytestmark = [pytest.mark.chaos]


def runs_of(tmp_path, text: str) -> Runs:
    path = tmp_path / "runs.txt"
    path.write_text(text)
    return Runs.read(path)


def test_one_start_and_one_end_is_clean(tmp_path):
    runs = runs_of(tmp_path, "start 1 1 10 5 1.0\nend 1 1 2.0\n")
    assert run_twice(["1"], runs, once=True) == {}


@pytest.mark.parametrize("text, once", [
    ("start 1 1 10 5 1.0\nend 1 1 2.0\nstart 1 2 11 6 3.0\nend 1 2 4.0\n", False),   # ran to the end twice
    ("start 1 1 10 5 1.0\nstart 1 2 11 6 3.0\nend 1 2 4.0\n", True),                 # a second start
    ("start 1 1 10 5 1.0\nstart 1 1 11 6 3.0\nend 1 1 4.0\n", False),                # one attempt started twice
    ("start 1 1 10 5 1.0\noverlap 1 2 10\nstart 1 2 11 6 3.0\nend 1 2 4.0\n", False),  # two runs at once
    ("start 1 1 10 5 1.0\n", False),                                                   # never ended
])
def test_a_job_run_twice_or_never_ended_is_caught(tmp_path, text, once):
    assert list(run_twice(["1"], runs_of(tmp_path, text), once=once)) == ["1"]


def test_an_interrupted_run_may_be_followed_by_another(tmp_path):
    runs = runs_of(tmp_path, "start 1 1 10 5 1.0\nstart 1 2 11 6 3.0\nend 1 2 4.0\n")
    assert run_twice(["1"], runs, once=False) == {}
