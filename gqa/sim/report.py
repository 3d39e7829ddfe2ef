"""Showing a replay: one table row per policy plus ratios against a base
policy (FIFO unless told) for people, one JSON object for scripts, wait-time CDFs as a picture."""

from pathlib import Path

from ..models.units import format_count, format_duration, to_cents
from .engine import MAX_RECLAIMS, SimResult
from .metrics import ratios
from .outputs import Outputs, cannot_write

AS_IT_RAN = "as it ran"   # what the trace records of the same jobs: a Slurm dump's starts and ends
RATIO_LINE = (("mean_wait", "mean wait"), ("p99_wait", "p99 wait"), ("mean_jct", "mean JCT"),
              ("mean_slowdown", "slowdown"), ("utilisation", "utilisation"),
              ("max_team_slowdown", "max team slowdown"), ("jain_fairness", "Jain"), ("cost", "cost"))


def as_json(trace: str, gpus: int, jobs: int, assumptions: list[str], summaries: dict[str, dict],
            estimates: str = "model", base: str = "fifo", as_it_ran: dict | None = None) -> dict:
    """`estimates`: how the wall times the trace lacks were filled in (gqa/sim/estimates.py);
    `base`: the policy the ratios are against (their key names it: ratios_vs_fifo); `as_it_ran`: what
    the trace records of the same jobs (metrics.recorded), where it records it."""
    out = {"trace": trace, "gpus": gpus, "jobs": jobs, "estimates": estimates, "assumptions": list(assumptions),
           "policies": summaries, f"ratios_vs_{base}": ratios(summaries, base)}
    if as_it_ran is not None:
        out["as_it_ran"] = as_it_ran
        out["ratios_vs_as_it_ran"] = ratios({**summaries, AS_IT_RAN: as_it_ran}, AS_IT_RAN)
    return out


def print_table(console, trace: str, gpus: int, jobs: int, assumptions: list[str],
                summaries: dict[str, dict], base: str = "fifo", as_it_ran: dict | None = None) -> None:
    from rich.table import Table

    if not console.is_terminal:  # a file or a pipe has no width to keep to
        console.width = max(console.width, 120)
    console.print(f"[bold]{trace}[/]: {format_count(jobs, 'job')} on {format_count(gpus, 'GPU')}")
    for line in assumptions:
        console.print(f"  [dim]- {line}[/]", soft_wrap=True)
    with_requeues = any(s["preemptions"] or s["reclaims"] for s in summaries.values())
    with_unfinished = any(s["unfinished"] for s in summaries.values())
    with_killed = any(s["timed_out"] for s in summaries.values())
    table = Table(box=None, pad_edge=False, header_style="bold")
    cols = ["policy", "mean\nwait", "p99\nwait", "mean\nJCT", "slow-\ndown", "util", "make-\nspan",
            "worst\nteam", "Jain"]
    cols += ["re-\nqueued"] * with_requeues + ["unfin-\nished"] * with_unfinished + ["killed\nat limit"] * with_killed
    for col in cols:
        table.add_column(col, justify="left" if col == "policy" else "right", no_wrap=True)
    for name, s in summaries.items():
        row = [name, _t(s["mean_wait"]), _t(s["p99_wait"]), _t(s["mean_jct"]), _x(s["mean_slowdown"]),
               _pct(s["utilisation"]), _t(s["makespan"]), _x(s["max_team_slowdown"]), _f(s["jain_fairness"], 2)]
        row += [str(s["preemptions"] + s["reclaims"])] * with_requeues + [str(s["unfinished"])] * with_unfinished
        row += [_pct(s["timed_out_share"])] * with_killed
        table.add_row(*row)
    if as_it_ran is not None:   # no utilisation: the cluster it ran on had what --gpus may not say
        r = as_it_ran
        table.add_row(AS_IT_RAN, _t(r["mean_wait"]), _t(r["p99_wait"]), _t(r["mean_jct"]), _x(r["mean_slowdown"]),
                      "-", _t(r["makespan"]), _x(r["max_team_slowdown"]), _f(r["jain_fairness"], 2),
                      *["-"] * (len(cols) - 9))
    console.print(table)
    for name, s in summaries.items():
        if s.get("given_up"):
            jobs_were = "1 job was" if s["given_up"] == 1 else f"{s['given_up']} jobs were"
            console.print(f"{name}: {jobs_were} given up, unfinished, at {MAX_RECLAIMS:,} reclaims, losing work "
                          "faster than checkpoints kept it (--checkpoint-interval, --checkpoint-on-notice, or an "
                          "on-demand pool)", soft_wrap=True)
    for name, s in summaries.items():
        if s.get("cost") is not None:
            saving = f", spot saved {_money(s['spot_saving'])}" if s.get("spot_saving") is not None else ""
            console.print(f"{name} cost: {_money(s['cost'])}{saving}", soft_wrap=True)
    for name, r in ratios(summaries, base).items():
        parts = [f"{label} {r[key]:.2f}x" for key, label in RATIO_LINE if r.get(key) is not None]
        console.print(f"{name} / {base}: " + ", ".join(parts), soft_wrap=True)
    if as_it_ran is not None:
        for name, r in ratios({**summaries, AS_IT_RAN: as_it_ran}, AS_IT_RAN).items():
            parts = [f"{label} {r[key]:.2f}x" for key, label in RATIO_LINE if r.get(key) is not None]
            console.print(f"{name} / {AS_IT_RAN}: " + ", ".join(parts), soft_wrap=True)
    if any(len(s.get("tier_mean_jct") or ()) > 1 for s in summaries.values()):
        for name, s in summaries.items():
            console.print(f"{name} mean JCT by tier: "
                          + ", ".join(f"{tier} {_t(jct)}" for tier, jct in s["tier_mean_jct"].items()), soft_wrap=True)
    if any(s.get("eta_median_abs_error") is not None for s in summaries.values()):
        for name, s in summaries.items():
            if not s.get("eta_checked"):   # las and las-tiers replay outside the pass that predicts starts
                console.print(f"{name} ETA error at submit: none predicted (only the scheduling pass predicts starts)")
                continue
            console.print(f"{name} ETA error at submit: {eta_line(s)}", soft_wrap=True)


def _money(amount: float) -> str:
    """`$1,234.57`: to the cent, halves up, as gqa shows money everywhere."""
    return f"${to_cents(amount):,.2f}"


def eta_line(s: dict) -> str:
    """The ETA's errors at submission, over every job checked and over those that waited, with the
    mean error over their mean wait: the figure the ETA's goal is judged by (at most 0.3)."""
    checked, waited = s["eta_checked"], s.get("eta_waited_checked") or 0
    line = (f"median {_t(s['eta_median_abs_error'])}, p90 {_t(s['eta_p90_abs_error'])} over "
            f"{format_count(checked, 'job')}; ")
    if not waited:
        return line + ("it did not wait" if checked == 1 else "none of them waited")
    of_wait = s.get("eta_error_of_wait")
    share = f" ({of_wait:.2f} of their mean wait, {_t(s.get('eta_waited_mean_wait'))})" if of_wait is not None else ""
    return line + (f"over the {waited:,} that waited: mean {_t(s.get('eta_waited_mean_abs_error'))}{share}, "
                   f"median {_t(s.get('eta_waited_median_abs_error'))}, p90 {_t(s.get('eta_waited_p90_abs_error'))}")


def plot_waits(results: dict[str, SimResult], path: str | Path, title: str, suffix: str | None = None) -> None:
    """Wait-time CDF per policy, written to `path` (a temporary name, from outputs.Outputs) in the
    format `suffix` names (.png, .svg, .pdf; by default `path`'s own)."""
    import matplotlib

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
    try:
        fig.savefig(path, dpi=120, format=_format(suffix or Path(path).suffix))
    finally:
        plt.close(fig)


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def plot_path_problem(path: str) -> str | None:
    """What keeps a picture from being written to `path`, checked before the replays that make it
    (minutes on a whole trace), or None."""
    where = Path(path)
    if where.suffix.lower() not in PLOT_SUFFIXES:
        return f"name a {', '.join(PLOT_SUFFIXES[:-1])} or {PLOT_SUFFIXES[-1]} file"
    try:   # a name too long for the file system is an OSError here, not False
        if where.is_dir():
            return "is a folder; name a file in it"
        if not where.parent.is_dir():
            return f"no folder {where.parent}"
    except OSError as exc:
        return f"cannot be written ({exc.strerror or exc})"
    problem = cannot_write(where.parent, where.name)   # a file made there and removed, as the writer will
    if problem is not None:
        return f"cannot be written ({problem.strerror or problem})"
    return None


def save_whole(fig, path: str, dpi: int) -> None:
    """Whole or not at all: written beside `path` and renamed, so a full disk leaves no
    half-written picture under the name asked for."""
    outputs = Outputs()
    try:
        fig.savefig(outputs.file(path), dpi=dpi, format=_format(Path(path).suffix))
        outputs.commit()
    except BaseException:
        outputs.discard()
        raise


def _format(suffix: str) -> str:
    return suffix.lstrip(".").lower() or "png"


def _t(seconds: float | None) -> str:
    return format_duration(seconds) if seconds is not None else "-"


def _f(value: float | None, digits: int) -> str:
    return f"{value:,.{digits}f}" if value is not None else "-"


def _x(value: float | None) -> str:
    """Slowdowns run from 1 to thousands: three significant figures at most."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "-"
