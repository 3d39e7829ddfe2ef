"""`gqa quota show|set`: team shares and GPU caps."""

from typing import Annotated, Optional

import typer

from .app import app as gqa
from .options import Output, check_output
from .output import fail, money, print_json, user_errors

app = typer.Typer(help="Team fair-share weights and GPU caps.", no_args_is_help=True)
gqa.add_typer(app, name="quota")


@app.command("show")
def show(output: Output = "table"):
    """Every team's share and caps, with the GPUs it holds now."""
    fmt = check_output(output)
    with user_errors():
        from .backend import backend

        view = backend().quota().show()
    rows = [{"team": t.team, "share": t.policy.share, "max_gpus": t.policy.max_gpus,
             "max_gpus_per_user": t.policy.max_gpus_per_user, "budget": t.policy.budget,
             "stop_at_budget": t.policy.stop_at_budget,
             "gpus_in_use": t.gpus_in_use, "configured": t.configured, "members": list(t.members)}
            for t in view.teams]
    if fmt == "json":
        print_json({"teams": rows})
        return
    from .queue_table import width

    cells = [[r["team"] + ("" if r["configured"] else " (defaults)"), f"{r['share']:g}", _cap(r["max_gpus"]),
              _cap(r["max_gpus_per_user"]), str(r["gpus_in_use"]), _money(r["budget"]),
              "-" if r["budget"] is None else "hold queue, stop jobs" if r["stop_at_budget"] else "hold queue"]
             for r in rows]
    print("\n".join(_table(cells, [r["members"] for r in rows], width())))


@app.command("set")
def set_(
    team: Annotated[str, typer.Argument(help="Team name.", show_default=False)],
    share: Annotated[Optional[float], typer.Option(help="Fair-share weight (relative, > 0).")] = None,
    max_gpus: Annotated[Optional[int], typer.Option(help="Concurrent GPUs for the team (-1: no cap).")] = None,
    max_gpus_per_user: Annotated[Optional[int], typer.Option(help="Concurrent GPUs per user (-1: no cap).")] = None,
    budget: Annotated[Optional[float], typer.Option(help="Spend allowed per calendar month (-1: no budget).")] = None,
    stop_at_budget: Annotated[Optional[bool], typer.Option(
        "--stop-at-budget/--no-stop-at-budget",
        help="At 100% of the budget also requeue the team's running jobs (they checkpoint and wait, held); "
             "without it only the queue is held.", show_default=False)] = None,
    members: Annotated[Optional[str], typer.Option(
        help="Who may submit for the team, replacing the list: users, IAM ARN patterns (* allowed) and, on "
             "this machine, Unix groups as @group; comma-separated, e.g. alice,bob,@ml. none: only admins.",
        show_default=False)] = None,
    output: Output = "table",
):
    """Set a team's share, caps and members; unset options keep their value."""
    fmt = check_output(output)
    from gqa.models.spec import NAME_RE

    if not NAME_RE.match(team):
        fail(f"{team!r} is not a valid team name")
    if share is not None and share <= 0:
        fail(f"--share must be positive, got {share}")
    if budget is not None and budget < 0 and budget != -1:
        fail(f"--budget must be an amount >= 0, or -1 for no budget; got {budget:g}")
    for flag, value in (("--max-gpus", max_gpus), ("--max-gpus-per-user", max_gpus_per_user)):
        if value is not None and value < -1:
            fail(f"{flag} must be a GPU count, or -1 for no cap; got {value}")
    listed: list[str] | None = None
    if members is not None:
        listed = [] if members.strip() == "none" else [m.strip() for m in members.split(",") if m.strip()]
        if listed == [] and members.strip() != "none":
            fail("--members needs names (alice,bob,@ml), or none to leave the team to admins")
    if listed:
        from gqa.services.quota import members_problem

        problem = members_problem(listed)   # before anything is written
        if problem:
            fail(f"--members: {problem}")
    changes = dict(share=share, max_gpus=max_gpus, max_gpus_per_user=max_gpus_per_user, budget=budget,
                   stop_at_budget=stop_at_budget)
    with user_errors():
        from .backend import backend

        quota = backend().quota()
        # members alone change no quota: nothing else is written
        policy = quota.set(team, **changes) if listed is None or any(v is not None for v in changes.values()) \
            else None
        if listed is not None:
            listed = list(quota.set_members(team, listed))
    if fmt == "json":
        data = {} if policy is None else {"share": policy.share, "max_gpus": policy.max_gpus,
                                          "max_gpus_per_user": policy.max_gpus_per_user, "budget": policy.budget,
                                          "stop_at_budget": policy.stop_at_budget}
        print_json({"team": team, **data, **({} if listed is None else {"members": listed})})
        return
    if listed is not None:
        print(f"team {team}: members {', '.join(listed) if listed else 'none (only admins may submit for it)'}")
    if policy is not None:
        at_budget = "" if policy.budget is None else f" ({_at_budget(policy.stop_at_budget)} at 100%)"
        print(f"team {team}: share {policy.share:g}, max GPUs {_cap(policy.max_gpus)}, "
              f"max GPUs per user {_cap(policy.max_gpus_per_user)}, "
              f"budget {_money(policy.budget)} per month{at_budget}")


def _cap(value: int | None) -> str:
    return "-" if value is None else str(value)


def _money(value: float | None) -> str:
    return "-" if value is None else money(value)


def _at_budget(stop: bool) -> str:
    return "hold queue, stop running jobs" if stop else "hold queue"


@app.command("policy")
def policy(
    max_gpus_per_job: Annotated[Optional[int], typer.Option(help="Largest job, in GPUs (-1: no limit).")] = None,
    max_wall_time: Annotated[Optional[str], typer.Option(help="Longest wall time a job may ask for, e.g. 3d "
                                                         "(-1: no limit).")] = None,
    half_life: Annotated[Optional[str], typer.Option(help="Fair-share usage half-life, e.g. 7d.")] = None,
    fair_share_weight: Annotated[Optional[float], typer.Option(help="Weight of the fair-share factor.")] = None,
    age_weight: Annotated[Optional[float], typer.Option(help="Weight of the age factor.")] = None,
    duration_weight: Annotated[Optional[float], typer.Option(
        help="Weight of the expected-run-time factor (shorter wall times rank higher; 0: ignore them).")] = None,
    preempt: Annotated[Optional[str], typer.Option(help="Tiers whose running jobs higher tiers may preempt: "
                                                   "e.g. low, or low,normal; none to turn preemption off.")] = None,
    time_slice: Annotated[Optional[str], typer.Option("--slice", help="Tiers to time-slice (their jobs checkpoint "
                                                      "when stopped): a job that has had its slice of GPU time "
                                                      "ranks after the tier's others, which may preempt it; e.g. "
                                                      "normal, or normal,low; none to turn it off.")] = None,
    slice_after: Annotated[Optional[str], typer.Option(help="A job's slice, in GPU time (GPUs x run time), "
                                                       "e.g. 1h.")] = None,
    slice_min_run: Annotated[Optional[str], typer.Option(help="Slicing stops a job only after its attempt ran "
                                                         "this long, e.g. 2m; keep it above the time a job "
                                                         "takes to reload its checkpoint. An attempt started "
                                                         "while its job was demoted runs 2 slices first.")] = None,
    slice_starve: Annotated[Optional[float], typer.Option(help="A demoted job that has waited this many times "
                                                          "as long as it ran is promoted back (0: never); "
                                                          "slicing stops a run only once it would be demoted "
                                                          "again, or 4 slices into its attempt.")] = None,
    backfill_by: Annotated[Optional[str], typer.Option(
        help="What backfill counts a job's run as: limits (its wall time: a backfilled job never delays a "
             "reserved one) or predictions (its expected run time, from its team's history: reserved jobs "
             "start sooner when jobs ask far more than they use, but may be delayed).")] = None,
    approve_over_gpus: Annotated[Optional[int], typer.Option(help="Jobs with more GPUs wait for approval "
                                                             "(-1: no threshold).")] = None,
    approve_over_gpu_hours: Annotated[Optional[float], typer.Option(help="...more GPU-hours (-1: none).")] = None,
    approve_over_cost: Annotated[Optional[float], typer.Option(help="...a higher cost cap (-1: none).")] = None,
    alert_pending_after: Annotated[Optional[str], typer.Option(help="Alert on a job waiting longer than this, "
                                                               "e.g. 4h (-1: never).")] = None,
    budget_alerts: Annotated[Optional[str], typer.Option(help="Budget alert thresholds in percent, e.g. "
                                                         "50,80,100 (none: no alerts).")] = None,
    idle_gpu_below: Annotated[Optional[float], typer.Option(help="A running job is idle when its GPUs average "
                                                            "under this percent...")] = None,
    idle_gpu_window: Annotated[Optional[str], typer.Option(help="...over this long, e.g. 30m (-1: no idle "
                                                           "alerts).")] = None,
    output: Output = "table",
):
    """Show or set the queue-wide limits per job and the priority weights."""
    fmt = check_output(output)
    for flag, value in (("--fair-share-weight", fair_share_weight), ("--age-weight", age_weight),
                        ("--duration-weight", duration_weight)):
        if value is not None and value < 0:
            fail(f"{flag} must be >= 0, got {value}")
    if max_gpus_per_job is not None and (max_gpus_per_job == 0 or max_gpus_per_job < -1):
        fail(f"--max-gpus-per-job must be a GPU count, or -1 for no limit; got {max_gpus_per_job}")
    from gqa.models.priority import Priority

    # nothing is above high: it is never preempted by a higher tier
    tiers = _tier_ranks("--preempt", preempt, [p for p in Priority if p is not Priority.HIGH], "low and/or normal")
    sliced = _tier_ranks("--slice", time_slice, list(Priority), "high, normal and/or low")
    if backfill_by is not None:
        from gqa.scheduling.horizon import backfill_by_choice

        try:
            backfill_by_choice(backfill_by)
        except ValueError as exc:
            fail(f"--backfill-by: {exc}")
    if slice_starve is not None and slice_starve < 0:
        fail(f"--slice-starve must be >= 0, got {slice_starve:g}")
    thresholds = None
    if budget_alerts is not None:
        thresholds = _thresholds(budget_alerts)
    if idle_gpu_below is not None and not 0 <= idle_gpu_below <= 100:
        fail(f"--idle-gpu-below must be a percentage from 0 to 100, got {idle_gpu_below:g}")
    with user_errors():
        from gqa.models.errors import SpecError
        from gqa.models.units import parse_duration
        from gqa.services.quota import NO_CAP

        from .backend import backend

        def seconds(flag: str, text: str | None, allow_none: bool) -> float | None:
            if text is None:
                return None
            if allow_none and text.strip() == "-1":
                return NO_CAP
            try:
                return parse_duration(text)
            except SpecError as exc:
                raise SpecError(f"{flag}: {exc}") from None

        changes = dict(
            max_gpus_per_job=max_gpus_per_job, max_wall_time=seconds("--max-wall-time", max_wall_time, True),
            half_life=seconds("--half-life", half_life, False), fair_share_weight=fair_share_weight,
            age_weight=age_weight, duration_weight=duration_weight, preempt_tiers=tiers,
            approval_gpus=approve_over_gpus,
            approval_gpu_hours=approve_over_gpu_hours, approval_cost=approve_over_cost,
            alert_pending_after=seconds("--alert-pending-after", alert_pending_after, True),
            budget_alerts=thresholds, idle_gpu_percent=idle_gpu_below,
            idle_gpu_window=seconds("--idle-gpu-window", idle_gpu_window, True), slice_tiers=sliced,
            slice_after=seconds("--slice-after", slice_after, False),
            slice_min_run=seconds("--slice-min-run", slice_min_run, False), slice_starve=slice_starve,
            backfill_by=backfill_by)
        quota = backend().quota()
        # with nothing to change it only reads: anyone may look, only admins may set (on AWS)
        if any(v is not None for v in changes.values()):
            current = quota.set_policy(**changes)
        else:
            current = quota.policy()
    from gqa.models.priority import Priority
    from gqa.models.units import format_duration

    preemptible = [Priority.of_rank(t).value for t in current.preempt_tiers]
    sliced_names = [Priority.of_rank(t).value for t in current.slice_tiers]
    data = {"max_gpus_per_job": current.max_gpus_per_job, "max_wall_time": current.max_wall_time,
            "half_life": current.half_life, "approval": {"gpus": current.approval_gpus,
                                                         "gpu_hours": current.approval_gpu_hours,
                                                         "cost": current.approval_cost},
            "preempt": preemptible, "backfill_by": current.backfill_by,
            "time_slice": {"tiers": sliced_names, "after_gpu_seconds": current.slice_after,
                           "min_run": current.slice_min_run, "starve": current.slice_starve},
            "alerts": {"budget_percent": list(current.budget_alerts),
                       "pending_after": current.alert_pending_after,
                       "idle_gpu_below": current.idle_gpu_percent, "idle_gpu_window": current.idle_gpu_window},
            "weights": {"fair_share": current.weights.fair_share, "age": current.weights.age,
                        "size": current.weights.size, "duration": current.weights.duration}}
    if fmt == "json":
        print_json(data)
        return
    print(f"max GPUs per job   {_cap(current.max_gpus_per_job)}")
    print(f"max wall time      {format_duration(current.max_wall_time) if current.max_wall_time else '-'}")
    print(f"fair-share half-life {format_duration(current.half_life)}")
    print(f"weights            fair share {current.weights.fair_share:g}, age {current.weights.age:g}, "
          f"size {current.weights.size:g}, duration {current.weights.duration:g}")
    print(f"backfill by        {_BACKFILL_BY.get(current.backfill_by, current.backfill_by)}")
    print(f"preemptible tiers  {', '.join(preemptible) or 'none'}")
    if sliced_names:
        starve = f"promoted after waiting {current.slice_starve:g}x its run" if current.slice_starve \
            else "never promoted"
        print(f"time-sliced tiers  {', '.join(sliced_names)}: a {current.slice_after / 3600:.2g} GPU-hour slice, "
              f"stopped after {format_duration(current.slice_min_run)} at least; {starve}")
    else:
        print("time-sliced tiers  none")
    approval = [f"{name} > {value:g}" for name, value in (("GPUs", current.approval_gpus), (
        "GPU-hours", current.approval_gpu_hours), ("cost", current.approval_cost)) if value is not None]
    print(f"approval needed    {', '.join(approval) or 'never'}")
    print(f"budget alerts      {', '.join(f'{t:g}%' for t in current.budget_alerts) or 'none'}")
    pending = f"after {format_duration(current.alert_pending_after)}" if current.alert_pending_after else "never"
    print(f"pending alert      {pending}")
    idle = (f"under {current.idle_gpu_percent:g}% for {format_duration(current.idle_gpu_window)}"
            if current.idle_gpu_window else "never")
    print(f"idle GPU alert     {idle}")


_BACKFILL_BY = {"limits": "limits (a job's wall time)",
                "predictions": "predictions (a job's expected run time, longer once outlived)"}


def _tier_ranks(flag: str, text: str | None, allowed: list, spelled: str) -> tuple[int, ...] | None:
    """'low,normal' -> the tiers' ranks, from `allowed` (Priority members); 'none' -> (); None: not given."""
    if text is None:
        return None
    names = {p.value: p.rank for p in allowed}
    wanted = [t.strip() for t in text.split(",") if t.strip() and t.strip() != "none"]
    if any(t not in names for t in wanted):
        fail(f"{flag} takes {spelled} (or none), got {text!r}")
    return tuple(names[t] for t in wanted)


def _thresholds(text: str) -> tuple[float, ...]:
    """'50,80,100' -> (50.0, 80.0, 100.0); 'none' -> ()."""
    if text.strip().lower() == "none":
        return ()
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        fail(f"--budget-alerts takes percentages separated by commas, e.g. 50,80,100; got {text!r}")
    if not values or any(v <= 0 for v in values):
        fail(f"--budget-alerts takes percentages above 0, e.g. 50,80,100; got {text!r}")
    return values


# `gqa quota show`'s columns before the members: header, keep (the lowest is dropped first when the line does
# not fit; 9: never), right-aligned. Money is never dropped nor cut, a team's name cut only when nothing is left
# to drop; the members fold onto more lines.
QUOTA_COLUMNS = (("team", 9, False), ("share", 2, True), ("max gpus", 5, True), ("max gpus/user", 1, True),
                 ("in use", 4, True), ("budget/month", 9, True), ("at budget", 3, False))
MEMBERS_MIN = 16     # the members' least width before a column is dropped for them...
MEMBERS_LEAST = 8    # ...and before a team's name is cut for them (to no less than NAME_MIN)
MEMBER_LINES = 3     # a team's members fold over at most this many lines; the rest are counted
NAME_MIN = 8


def _table(rows: list[list[str]], members: list[list[str]], total: int) -> list[str]:
    """The quota table's lines, `total` cells wide where it can be: columns dropped, least
    useful first, until the members have MEMBERS_MIN; then, where they have not MEMBERS_LEAST,
    team names cut to NAME_MIN."""
    from .queue_table import cells, cut

    widths = [max([cells(h)] + [cells(r[i]) for r in rows]) for i, (h, _, _) in enumerate(QUOTA_COLUMNS)]
    natural = max([len("members")] + [len(", ".join(m)) for m in members])
    shown = list(range(len(QUOTA_COLUMNS)))

    def room(kept: list[int]) -> int:
        return total - sum(widths[i] + 2 for i in kept)

    droppable = sorted((i for i in shown if QUOTA_COLUMNS[i][1] < 9), key=lambda i: QUOTA_COLUMNS[i][1])
    while room(shown) < min(MEMBERS_MIN, natural) and droppable:
        shown.remove(droppable.pop(0))

    def whole(kept: list[int]) -> bool:
        fold = room(kept)
        return fold > 0 and all(len(_members(m, fold, counted=False)) <= MEMBER_LINES for m in members)

    # a team's members are counted only where they do not fit: more columns give way for them, where that
    # is enough for every team's
    if not whole(shown):
        enough = next((n for n in range(1, len(droppable) + 1)
                       if whole([i for i in shown if i not in droppable[:n]])), 0)
        shown = [i for i in shown if i not in droppable[:enough]]
    short = min(MEMBERS_LEAST, natural) - room(shown)
    if short > 0:     # nothing left to drop: the names give way, down to NAME_MIN
        widths[0] = max(min(widths[0], NAME_MIN), widths[0] - short)
    fold = max(len("members"), min(natural, room(shown)))

    def line(parts: list[str], last: str) -> str:
        padded = []
        for i, text in zip(shown, parts):
            text = cut(text, widths[i]) if i == 0 else text
            gap = " " * max(0, widths[i] - cells(text))
            padded.append(gap + text if QUOTA_COLUMNS[i][2] else text + gap)
        return ("  ".join(padded) + "  " + last).rstrip()

    lines = [line([QUOTA_COLUMNS[i][0] for i in shown], "members")]
    indent = sum(widths[i] + 2 for i in shown)
    for row, names in zip(rows, members):
        folded = _members(names, fold)
        lines.append(line([row[i] for i in shown], folded[0]))
        lines += [(" " * indent + more).rstrip() for more in folded[1:]]
    return lines


def _members(members: list[str], width: int, most: int = MEMBER_LINES, counted: bool = True) -> list[str]:
    """The members folded to `width` over at most `most` lines: all of them where they fit,
    else as many as fit and "and N more" (`counted`; else all of them, over as many lines)."""
    import textwrap

    if not members:
        return ["-"]

    def folded(shown: int) -> list[str]:
        more = len(members) - shown
        tail = "" if not more else f" and {more} more" if shown else f"{more} members"
        text = ", ".join(members[:shown]) + tail
        # a line a name: one longer than the width alone is broken
        lines = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
        return [line[i:i + width] for line in lines for i in range(0, len(line), width)]

    if not counted:
        return folded(len(members))
    # no more names than their letters and commas alone could fill `most` lines with: a long list is not
    # folded once per name
    fit, used = 0, -1
    for name in members:
        used += len(name) + 1
        if used > width * most:
            break
        fit += 1
    for shown in range(fit, -1, -1):
        lines = folded(shown)
        if len(lines) <= most:
            return lines
    return lines
