"""`gqa quota show` at any width: money is never cut, a team's name only where
nothing else is left to give way, and a team's members are counted ("and N
more") only where they do not fit."""

import pytest

from tests.cli.test_top import running as started

LONG = "computer-vision-research"
ARN = "arn:aws:iam::123456789012:role/train-*"


@pytest.fixture
def teams(cli):
    for args in (("vision", "--budget", "1000", "--max-gpus", "4", "--members", "alice,bob,carol,dave,erin"),
                 ("nlp", "--budget", "0.5", "--stop-at-budget", "--members", "ana"),
                 (LONG, "--budget", "123456.78", "--members", f"@ml-researchers,{ARN}")):
        code, _, err = cli("quota", "set", *args)
        assert code == 0, err
    started(cli, "train", (0,))       # the default team holds a GPU: shown, with its defaults
    return cli


def shown(cli, monkeypatch, width: int) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = cli("quota", "show")
    assert code == 0, err
    return out.splitlines()


@pytest.mark.parametrize("width, names_whole, members_whole", [
    (30, False, False),     # no room: the long name is cut, members counted
    (50, True, False),      # the long name fits once the other columns give way
    (80, True, True),
    (120, True, True),
    (200, True, True),
])
def test_money_is_never_cut_and_names_and_members_only_without_room(teams, monkeypatch, width, names_whole,
                                                                    members_whole):
    lines = shown(teams, monkeypatch, width)
    text = "\n".join(lines)
    words = " ".join(text.split())
    for money in ("$1,000.00", "$0.50", "$123,456.78"):
        assert money in text
    assert "…" not in text.replace(LONG[:-1], "") or not names_whole
    assert all(name in text for name in ("vision", "nlp", "default (defaults)" if names_whole else "default"))
    assert (LONG in text) == names_whole
    if members_whole:
        assert "more" not in text and "alice, bob, carol, dave, erin" in words and "@ml-researchers," in words
        assert ARN in text.replace(" ", "").replace("\n", "")      # an ARN longer than its column is broken
    if width >= 50:
        assert all(len(line) <= width for line in lines), lines


def test_at_50_columns_the_members_fold_and_only_a_list_too_long_is_counted(teams, monkeypatch):
    lines = shown(teams, monkeypatch, 50)
    assert lines[0].split() == ["team", "budget/month", "members"]
    vision = lines[next(n for n, line in enumerate(lines) if line.startswith("vision "))]
    assert vision.split()[:2] == ["vision", "$1,000.00"] and "alice," in vision
    assert not any("ana and" in line for line in lines)


@pytest.mark.parametrize("names, width, lines", [
    ([], 10, ["-"]),
    (["ana"], 10, ["ana"]),
    (["alice", "bob", "carol", "dave", "erin"], 30, ["alice, bob, carol, dave, erin"]),
    (["alice", "bob", "carol", "dave", "erin"], 18, ["alice, bob, carol,", "dave, erin"]),   # folded, not counted
    (["alice", "bob", "carol", "dave", "erin"], 10, ["alice,", "bob, carol", "and 2 more"]),
    ([ARN], 20, [ARN[:20], ARN[20:]]),                          # a name wider than the column alone is broken
    (["x" * 40, "y"], 9, ["2 members"]),
])
def test_members_fold_over_three_lines_and_are_counted_only_past_them(names, width, lines):
    from cli.quota import _members

    assert _members(names, width) == lines
