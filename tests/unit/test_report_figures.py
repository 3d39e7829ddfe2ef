"""A report drawn: each figure a PNG of the expected size with something on it,
and the page self-contained (figures as data: URIs, nothing fetched) and escaped."""

import base64
import io
import re
from dataclasses import replace

import pytest

from gqa.models.job import JobState
from gqa.reporting import FIGURES, PoolSpec, ReportInput, build, html_page, render_figure, render_figures, write_report
from gqa.reporting.figures import DPI, HEIGHT, WIDTH
from tests.unit.test_report_metrics import ran

H = 3600.0
T0 = 1_790_000_000.0


def _rows():
    rows = []
    for i in range(24):
        submitted = T0 + i * H
        rows.append(ran(str(i), submitted, submitted + 60 * i, submitted + 60 * i + 2 * H, tier=i % 3, gpus=2,
                        gpu_type="a100", team=("vision", "nlp")[i % 2], cost=6.0, gpu_util=5.0 if i % 6 == 0 else 70.0,
                        waited=(("GPUs or quota", 60.0 * i),), state=(JobState.SUCCEEDED, JobState.FAILED)[i % 5 == 0]))
    rows[3] = replace(rows[3], name="<script>alert(1)</script>", gpu_util=1.0)
    return rows


@pytest.fixture(scope="module")
def report():
    return build(ReportInput(_rows(), since=T0, until=T0 + 86400, now=T0 + 86400,
                             pools=(PoolSpec("a100", False, 8, 3.0),), budgets={"vision": 3000.0}))


@pytest.fixture(scope="module")
def figures(report):
    return render_figures(report)


def _pixels(png: bytes):
    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(png), format="png")


def test_every_figure_is_a_png_of_the_set_size(figures):
    assert list(figures) == list(FIGURES)
    for name, png in figures.items():
        assert png.startswith(b"\x89PNG\r\n\x1a\n"), name
        assert _pixels(png).shape[:2] == (int(HEIGHT * DPI), int(WIDTH * DPI)), name


def test_a_figure_with_data_draws_more_than_an_empty_one(report, figures):
    empty = build(ReportInput([], since=T0, until=T0 + 86400, now=T0 + 86400))
    for name, png in figures.items():
        drawn = (_pixels(png)[..., :3] < 0.9).mean()
        nothing = (_pixels(render_figure(empty, name))[..., :3] < 0.9).mean()
        assert nothing > 0, f"{name}: the empty figure says so"
        assert drawn > 2 * nothing, f"{name}: {drawn:.3f} of pixels drawn, {nothing:.3f} with no data"


def test_an_unknown_figure_is_refused(report):
    with pytest.raises(KeyError):
        render_figure(report, "nope")


def test_the_page_is_self_contained_and_escaped(report, figures):
    page = html_page(report, figures)
    links = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]+)""", page)
    assert len(links) == len(FIGURES) and all(link.startswith("data:image/png;base64,") for link in links)
    assert not re.search(r"https?://|<link|@import|url\(", page)
    embedded = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert [base64.b64decode(e) for e in embedded] == list(figures.values())
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # the numbers beside the figures
    assert "<td>vision</td>" in page and "GPU-hours idle" in page


def test_written_page_and_figures_beside_it(tmp_path, report):
    written = write_report(report, tmp_path / "out")
    assert written.page == tmp_path / "out" / "report.html"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(["report.html"] + [f"{n}.png"
                                                                                           for n in FIGURES])
    assert written.figures["waits"].read_bytes().startswith(b"\x89PNG")
    assert "data:image/png;base64," in written.page.read_text()
