"""A denial's reason is shown raw in every user's status, history and top: one line of printable
text of bounded length, or refused with nothing changed."""

import pytest


@pytest.mark.parametrize("reason, said", [
    ("x \x1b[31mRED", "got 10: 'x \\x1b[31mRED'"),      # an escape sequence would colour another user's terminal
    ("first\nsecond", "got 12: 'first\\nsecond'"),    # a line break splits the row of every view
    ("y" * 501, "got 501: 'yyy"),
])
def test_a_reason_that_is_not_a_short_line_is_refused_and_the_job_still_waits(cli, reason, said):
    cli.json("quota", "policy", "--approve-over-gpus", "2")
    big = cli.json("submit", "--gpus", "3", "--", "true")
    code, out, err = cli("deny", big["id"], "--reason", reason)
    assert code == 2 and out == ""
    assert err.startswith("gqa: error: --reason must be one line of printable text of at most 500 characters, ")
    assert said in err and err.count("\n") == 1
    assert cli.store.get(big["id"]).state.value == "PENDING_APPROVAL"
    [denied] = cli.json("deny", big["id"], "--reason", "y" * 500)
    assert denied["state"] == "REJECTED"
