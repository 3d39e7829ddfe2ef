"""The project's Markdown tables are well formed: a table whose delimiter row has another number of
cells than its header is not a table at all to a GitHub-flavoured renderer, only lines of pipes."""

import re
from itertools import takewhile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DELIMITER = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def cells(row: str) -> int:
    """Cells in a table row: pipes inside a code span or escaped with a backslash divide nothing."""
    row = re.sub(r"`[^`]*`", "", row.replace("\\|", ""))
    return len(row.strip().strip("|").split("|"))


def tables(text: str) -> list[tuple[int, list[str]]]:
    """(line number of the header, the header, delimiter and body rows) of each table, outside code blocks."""
    lines, found, fenced = text.split("\n"), [], False
    for at, line in enumerate(lines):
        fenced ^= line.lstrip().startswith("```")
        if not fenced and at and DELIMITER.match(line) and lines[at - 1].lstrip().startswith("|"):
            body = takewhile(lambda row: row.lstrip().startswith("|"), lines[at + 1:])
            found.append((at, [lines[at - 1], line, *body]))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_has_as_many_cells_in_each_row_as_its_header(doc):
    text = doc.read_text()
    found = tables(text)
    if doc.name == "README.md" and doc.parent == ROOT:
        assert len(found) > 10   # the README's tables are found at all
    wrong = [f"line {at + offset}: {cells(row)} cells, header {cells(rows[0])}"
             for at, rows in found for offset, row in enumerate(rows) if cells(row) != cells(rows[0])]
    assert not wrong, f"{doc.name}: " + "; ".join(wrong)


def test_a_delimiter_row_with_more_cells_than_its_header_is_caught():
    text = "| a | b |\n|---|---|---|\n| 1 | 2 |\n"
    ((_, rows),) = tables(text)
    assert [cells(row) for row in rows] == [2, 3, 2]
    assert cells("| `x|y` | a \\| b |") == 2
