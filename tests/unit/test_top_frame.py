"""`gqa top`'s frame (cli/top_frame.py): an Overview laid out for a terminal
of a given size, as plain text. Every line fits the width, the frame fits
the height, narrow terminals drop the least useful columns first, and the
queue's head takes the rows the other sections leave."""

import pytest
from rich.console import Console

from cli.top_frame import frame
from gqa.http.wire import overview_from_dict, overview_to_dict
from tests.builders import overview


def text(view, width: int, height: int | None, **kwargs) -> list[str]:
    return [line.plain for line in frame(view, width, height, **kwargs)]


def header_of(lines: list[str], title: str) -> str:
    """The column header under a section's title."""
    return lines[next(n for n, line in enumerate(lines) if line.startswith(title)) + 1]


@pytest.mark.parametrize("width", [80, 200])
def test_every_line_fits_the_width_and_the_frame_the_height(width):
    lines = text(overview(gpus=8, pending=40, events=20), width, 24)
    assert len(lines) == 24
    assert all(len(line) <= width for line in lines)


def test_at_80_columns_the_least_useful_columns_are_dropped_and_a_reason_is_cut():
    lines = text(overview(), 80, 24)
    assert header_of(lines, "GPUs").split() == ["gpu", "job", "name", "team", "elapsed", "util", "left", "owner",
                                                "mem", "pool"]
    assert header_of(lines, "pending").split() == ["pos", "job", "reason", "name", "team", "gpus", "waiting", "eta"]
    first = next(line for line in lines if line.lstrip().startswith("1  10"))
    assert "team nlp at 4 of 4 GPUs; nee…" in first
    narrow = text(overview(), 50, 24)
    assert header_of(narrow, "pending").split() == ["pos", "job", "reason", "name", "team"]


def test_at_200_columns_every_column_shows():
    lines = text(overview(), 200, 40)
    assert header_of(lines, "GPUs").split() == ["gpu", "job", "name", "team", "elapsed", "util", "left", "owner",
                                                "mem", "pool", "type"]
    assert header_of(lines, "pending").split() == ["pos", "job", "reason", "name", "team", "gpus", "waiting", "eta",
                                                   "owner", "prio"]
    row = next(line for line in lines if line.lstrip().startswith("0  7"))
    assert row.split() == ["0", "7", "train-resnet50", "vision", "1h10m", "87%", "50m00s", "alice", "29.3G",
                           "on-demand", "a100"]
    spot = next(line for line in lines if line.lstrip().startswith("3  -"))
    assert "free" in spot and "spot" in spot


def test_the_queue_head_shows_as_many_rows_as_fit_and_says_how_many_more():
    view = overview(gpus=4, pending=40, teams=2, events=3)
    lines = text(view, 80, 40)
    shown = [line for line in lines if "team nlp at" in line]
    more = next(line for line in lines if line.startswith("… ") and "more" in line)
    assert len(lines) == 40 and len(shown) + int(more.split()[1]) == 40
    assert len(text(view, 80, 24)) == 24 and len(shown) == 21
    taller = text(view, 80, 60)
    assert len([line for line in taller if "team nlp at" in line]) == 40
    assert not any(line.startswith("… ") for line in taller)


def test_without_a_height_every_row_shows():
    lines = text(overview(pending=25, events=12), 120, None)
    assert len([line for line in lines if "team nlp at" in line]) == 25
    assert len([line for line in lines if "exited 0" in line]) == 12


def test_teams_show_gpus_against_the_cap_and_spend_against_the_budget():
    lines = text(overview(), 80, 24)
    vision = next(line for line in lines if line.startswith("vision"))
    assert vision.split() == ["vision", "2/4", "$120.50", "$1,000.00", "12%"]


def test_an_error_shows_on_the_frame_with_the_last_overview():
    lines = text(overview(), 80, 24, error="lost contact with the queue daemon (retrying every 2s)")
    assert lines[1] == "! lost contact with the queue daemon (retrying every 2s)"
    assert any(line.startswith("GPUs") for line in lines) and len(lines) <= 24
    assert text(None, 80, 24, error="no daemon")[1] == "! no daemon"
    long = text(None, 40, 24, error="the shared queue daemon at /var/lib/gqa is not running; ask an admin " * 2)
    assert len(long) == 4 and long[1].startswith("! the shared") and long[2].startswith("  ")


def test_the_frame_renders_through_rich_within_the_terminal():
    console = Console(width=80, height=24, record=True, color_system=None, file=open("/dev/null", "w"))
    for line in frame(overview(pending=40), 80, 24):
        console.print(line, soft_wrap=False)
    rendered = console.export_text().splitlines()
    assert len(rendered) == 24 and all(len(line) <= 80 for line in rendered)


def test_the_overview_travels_as_json_unchanged():
    view = overview()
    assert overview_from_dict(overview_to_dict(view)) == view


def test_wide_names_take_two_cells_a_character_and_rows_stay_aligned():
    from dataclasses import replace

    view = overview()
    wide = replace(view.running[0], name="日本語の学習ジョブ")
    view = replace(view, gpus=[replace(g, job=wide if g.job else None) for g in view.gpus], running=[wide])
    from cli.queue_table import cells
    for width in (80, 200):
        lines = text(view, width, 24)
        assert all(cells(line) <= width for line in lines)
        header = header_of(lines, "GPUs")
        rows = [line for line in lines if "学習" in line]
        assert rows and all(cells(row[:row.index("vision")]) == header.index("team") for row in rows)


def test_a_job_on_cpus_alone_is_a_row_of_its_own():
    from dataclasses import replace

    view = overview()
    cpu = replace(view.running[0], id="9", name="preprocess", gpus=(), gpu_util=None, gpu_memory=None)
    view = replace(view, running=[*view.running, cpu])
    lines = text(view, 200, 40)
    assert lines[1] == "GPUs  2 of 4 busy, 2 jobs running"
    row = next(line for line in lines if "preprocess" in line)
    assert row.split()[:4] == ["cpu", "9", "preprocess", "vision"]


@pytest.mark.parametrize("spend, budget, used, style", [
    (5.0, None, "-", ""),
    (0.0, 0.0, "0%", ""),                # a $0 budget nothing has been spent against: none of it reached
    (1.0, 0.0, "over 100%", "red"),
    (85.0, 100.0, "85%", "yellow"),
    (99.999, 100.0, "99%", "yellow"),    # rounded down: 100% only once it is reached
    (100.0, 100.0, "100%", "red"),
])
def test_a_teams_spend_against_its_budget_reads_as_gqa_cost_and_gqa_ui_say_it(spend, budget, used, style):
    from dataclasses import replace

    from cli.output import budget_used
    from gqa.services.overview import TeamLoad

    view = replace(overview(), teams=[TeamLoad("ml", 0, None, spend, budget)])
    [row] = [line for line in frame(view, 120, None) if line.plain.startswith("ml ")]
    assert row.plain.endswith(f"  {used}") and row.style == style
    assert budget_used(spend, budget)[0] == used
