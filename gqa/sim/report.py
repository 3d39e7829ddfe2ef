"""Showing a replay: one table row per policy plus ratios against FIFO for
people, one JSON object for scripts, wait-time CDFs as a picture."""

from ..models.units import format_duration
from .engine import SimResult
from .metrics import ratios

RATIO_LINE = (("mean_wait", "mean wait"), ("p99_wait", "p99 wait"), ("mean_jct", "mean JCT"),
              ("mean_slowdown", "slowdown"), ("utilisation", "utilisation"),
              ("max_team_slowdown", "max team slowdown"), ("jain_fairness", "Jain"), ("cost", "cost"))


def as_json(trace: str, gpus: int, jobs: int, assumptions: list[str], summaries: dict[str, dict]) -> dict:
    return {"trace": trace, "gpus": gpus, "jobs": jobs, "assumptions": list(assumptions),
            "policies": summaries, "ratios_vs_fifo": ratios(summaries)}


def print_table(console, trace: str, gpus: int, jobs: int, assumptions: list[str],
                summaries: dict[str, dict]) -> None:
    from rich.table import Table

    console.print(f"[bold]{trace}[/]: {jobs} jobs on {gpus} GPUs")
    for line in assumptions:
        console.print(f"  [dim]- {line}[/]")
    with_cost = any(s.get("cost") is not None for s in summaries.values())
    table = Table(box=None, pad_edge=False, header_style="bold")
    cols = ["policy", "mean wait", "p50 wait", "p99 wait", "mean JCT", "p99 JCT", "slowdown", "util",
            "makespan", "max team sd", "Jain", "preempt", "unfinished"]
    if with_cost:
        cols += ["cost $", "spot saving $"]
    for col in cols:
        table.add_column(col, justify="left" if col == "policy" else "right")
    for name, s in summaries.items():
        row = [name, _t(s["mean_wait"]), _t(s["p50_wait"]), _t(s["p99_wait"]), _t(s["mean_jct"]),
               _t(s["p99_jct"]), _f(s["mean_slowdown"], 2), _pct(s["utilisation"]), _t(s["makespan"]),
               _f(s["max_team_slowdown"], 2), _f(s["jain_fairness"], 3), str(s["preemptions"]),
               str(s["unfinished"])]
        if with_cost:
            row += [_f(s.get("cost"), 0), _f(s.get("spot_saving"), 0)]
        table.add_row(*row)
    console.print(table)
    for name, r in ratios(summaries).items():
        parts = [f"{label} {r[key]:.2f}x" for key, label in RATIO_LINE if r.get(key) is not None]
        console.print(f"{name} / fifo: " + ", ".join(parts))
    if any(s.get("eta_median_abs_error") is not None for s in summaries.values()):
        for name, s in summaries.items():
            console.print(f"{name} ETA error at submit: median {_t(s['eta_median_abs_error'])}, "
                          f"p90 {_t(s['eta_p90_abs_error'])}")


def plot_waits(results: dict[str, SimResult], path: str, title: str) -> None:
    """Wait-time CDF per policy. matplotlib is optional (the `sim` extra)."""
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install 'gqa[sim]'") from None
    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, result in results.items():
        waits = sorted(o.start - o.submit for o in result.outcomes if o.start is not None)
        if waits:
            n = len(waits)
            ax.step([w / 3600 for w in waits], [(i + 1) / n for i in range(n)], where="post", label=name)
    ax.set_xscale("symlog", linthresh=1 / 60)  # minutes and days on one axis; 0 waits stay visible
    ax.set_xlabel("wait (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _t(seconds: float | None) -> str:
    return format_duration(seconds) if seconds is not None else "-"


def _f(value: float | None, digits: int) -> str:
    return f"{value:,.{digits}f}" if value is not None else "-"


def _pct(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "-"
