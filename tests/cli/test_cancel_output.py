"""`gqa cancel` prints a line per job, but one per big array (100,000 lines
would be the slow part); `-o json` still gives every job."""

import pytest

from cli.cancel import SUMMARISED_OVER


@pytest.mark.parametrize("tasks, printed", [
    (3, "cancelled 1_0\ncancelled 1_1\ncancelled 1_2\ncancelled 2\n"),
    (SUMMARISED_OVER + 1, f"array 1: {SUMMARISED_OVER + 1} cancelled\ncancelled 2\n"),
])
def test_big_arrays_print_one_line(cli, tasks, printed):
    cli.json("submit", "--array", f"0-{tasks - 1}", "--", "true")
    cli.json("submit", "--", "true")
    code, out, _ = cli("cancel", "1", "2")
    assert (code, out) == (0, printed)


def test_the_summary_counts_each_outcome_and_json_lists_every_job(cli):
    cli.json("submit", "--array", "0-1499", "--", "true")
    cli.json("cancel", "1_7")
    code, out, _ = cli("cancel", "1")
    assert (code, out) == (0, "array 1: 1,499 cancelled, 1 unchanged (already cancelled)\n")
    listed = cli.json("cancel", "1")
    assert len(listed) == 1500 and {c["action"] for c in listed} == {"unchanged"}
