"""Reports over a period: what the queue did, counted from `JobSummary` rows
(metrics.py, pure), drawn (figures.py, matplotlib loaded on first use), laid
out as one self-contained HTML page (page.py) and written (files.py)."""

from .metrics import PoolSpec, Report, ReportInput, build, pools_of
from .figures import FIGURES, render_figure, render_figures
from .files import Written, write_report
from .page import as_json, html_page

__all__ = ["FIGURES", "PoolSpec", "Report", "ReportInput", "Written", "as_json", "build", "html_page", "pools_of",
           "render_figure", "render_figures", "write_report"]
