"""`gqa simulate`: replay a cluster trace through the production scheduling
pass under each policy, and compare."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app
from .options import Output, check_output
from .output import console, fail, note, print_json

Opt = typer.Option
ETA_SAMPLE = 500   # jobs whose ETA is checked by default: each check runs the pass forward
MAX_POOLS_BYTES = 1 << 20   # a pools file lists a few pools: more is not one (/dev/zero through a pipe)


@app.command("simulate")
def simulate(
    trace: Annotated[str, typer.Argument(
        help="A trace: CSV (submit_time,duration,gpus[,team,priority,wall_time,user,name,gpu_type]), Slurm's "
             "accounting as sacct -X -P prints it (JobID|Submit|Start|End|ElapsedRaw|AllocTRES|...), gqa "
             "history -o csv, the ITP "
             "raw-traces.tar.gz (PATH:cluster04 for one cluster) or an Alibaba openb_pod_list csv.",
        show_default=False)],
    gpus: Annotated[Optional[int], Opt("--gpus", "-G", help="GPUs in the simulated cluster.")] = None,
    pools: Annotated[Optional[str], Opt("--pools", help="A YAML list of pools with prices (instead of "
                                                        "or matching --gpus): cost and spot saving; a job the "
                                                        "trace gives a GPU type runs only on pools of it.")]
        = None,
    policies: Annotated[Optional[str], Opt(
        "--policies", help="Comma-separated: fifo, fifo-easy (FIFO with EASY backfill), multifactor, gqa, "
                           "gqa-slice (gqa with time slicing: preemptive), las (Tiresias-style, preemptive), "
                           "las-tiers (las honouring the trace's tiers), sjf-oracle (knows true run times: a "
                           "bound). Default: all (las-tiers left out where every job is in one tier, both las "
                           "left out where --pools has several pools or reclaims).")] = None,
    base: Annotated[Optional[str], Opt("--base", help="The policy the others' ratios are against (default: "
                                                      "fifo, where replayed).")] = None,
    load: Annotated[float, Opt("--load", help="Arrival-rate multiplier: 2 halves the gaps.")] = 1.0,
    seed: Annotated[int, Opt("--seed", help="Seed for what the trace lacks (wall times, teams, users, reclaims).")] = 0,
    limit: Annotated[Optional[int], Opt("--limit", help="Only the first N jobs.")] = None,
    estimates: Annotated[str, Opt("--estimates", help="Wall times the trace lacks: model (actual x a lognormal "
                                                      "over-estimate), default (a share asks 1d whatever it needs), "
                                                      "max (all ask 7d), fitted (to a public log's requests).")]
        = "model",
    default_share: Annotated[float, Opt("--default-share", help="With --estimates default: the share of jobs "
                                                                "asking the partition default.")] = 0.4,
    shares: Annotated[Optional[str], Opt("--shares", help="Teams' fair shares, TEAM=SHARE comma-separated "
                                                          "(as Slurm's Fairshare or gqa quota set --share; a team "
                                                          "not named has 1). Default: equal.")] = None,
    qos_tiers: Annotated[Optional[str], Opt("--qos-tiers", help="The tier each of the trace's QOS stands for, "
                                                                "QOS=TIER comma-separated (urgent=high,"
                                                                "scavenger=low); a Slurm dump reads QOS high, "
                                                                "normal and low as those tiers.")] = None,
    priorities: Annotated[str, Opt("--priorities", help="trace (each job's priority tier as the trace gives "
                                                        "it) or one (every job normal, as fifo and las see "
                                                        "them): what honouring the tiers costs or gains.")]
        = "trace",
    checkpoint: Annotated[str, Opt("--checkpoint-interval",
                                   help="How often requeued jobs had checkpointed (none: never, "
                                        "so a stop loses the whole attempt).")] = "30m",
    on_notice: Annotated[bool, Opt("--checkpoint-on-notice", help="Jobs save a checkpoint on the 2-minute spot "
                                                                 "interruption notice: a reclaim loses only the "
                                                                 "notice.")] = False,
    restart: Annotated[Optional[str], Opt("--restart-cost", help="Time a resumed attempt (after a preemption or "
                                                                 "a reclaim) spends reloading before new work, "
                                                                 "e.g. 60s (default: 0, none).")] = None,
    backfill_by: Annotated[str, Opt("--backfill-by", help="What gqa and gqa-slice count a job's run as when they "
                                                          "backfill: limits (its wall time, as the baselines "
                                                          "do) or predictions (its expected run time; gqa quota "
                                                          "policy --backfill-by).")] = "limits",
    plot: Annotated[Optional[str], Opt("--plot", help="Write wait-time CDFs to this PNG (or .svg, .pdf).")] = None,
    report: Annotated[Optional[str], Opt("--report", help="Write each policy's report (as gqa report's) "
                                                          "to DIR/<policy>/report.html.")] = None,
    eta_sample: Annotated[Optional[int], Opt(
        "--eta-every", help="Check the ETA of every Nth arrival (0: never; default: about "
                            f"{ETA_SAMPLE} jobs, as each check replays the queue forward).")] = None,
    output: Output = "table",
):
    """Replay TRACE under each policy with the real scheduling pass; print waits,
    completion times, slowdown, utilisation and fairness, and ratios against FIFO (or --base).

    Examples: gqa simulate raw-traces.tar.gz --gpus 1300 | gqa simulate jobs.csv --gpus 8 -o json |
    gqa simulate sacct.txt --gpus 64
    """
    import time

    from gqa.models.errors import SpecError
    from gqa.sim import cluster, derive, load_trace, summarize
    from gqa.sim.engine import production_eta
    from gqa.sim.policies import NAMES, left_out, refused, run_policy
    from gqa.sim.pools import MAX_GPUS, PoolError, cost, load_pools, pool_gpus, reclaim_rates
    from gqa.sim.outputs import Outputs
    from gqa.sim.report import as_json, plot_waits, print_table
    from gqa.sim.estimates import Estimates, EstimatesError
    from gqa.sim.trace import TraceError, read_input
    from gqa.sim.workload import load_problem, priorities_choice, qos_tiers_choice, shares_choice, with_qos_tiers
    from gqa.scheduling import Policy
    from gqa.scheduling.horizon import LIMITS, backfill_by_choice
    from gqa.scheduling.inventory import SPOT_HOURS_PER_RECLAIM

    fmt = check_output(output)
    names = [p.strip().lower() for p in policies.split(",") if p.strip()] if policies is not None else list(NAMES)
    unknown = [p for p in names if p not in NAMES]
    if unknown or not names:
        fail(f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(NAMES)}")
    if twice := next((p for i, p in enumerate(names) if p in names[:i]), None):   # replayed twice, shown once
        fail(f"--policies names {twice} twice")
    named_base = base.strip().lower() if base is not None else None
    if named_base is not None and named_base not in names:
        fail(f"--base {base} is not among the policies replayed ({', '.join(names)})")
    base = named_base or "fifo"
    if problem := load_problem(load):
        fail(f"--{problem}")
    if eta_sample is not None and eta_sample < 0:
        fail("--eta-every must be 0 (never) or more")
    if limit is not None and limit < 1:
        fail("--limit must be at least 1")
    if plot is not None:   # refused before the replay, which on a whole trace takes minutes
        _check_plot(plot)
    if report is not None:
        _check_report(report)
    try:
        asked = Estimates(estimates.strip().lower(), default_share)
    except EstimatesError as exc:
        fail(f"--estimates: {exc}")
    try:
        priorities = priorities_choice(priorities)
    except ValueError as exc:
        fail(f"--{exc}")
    try:
        team_shares = shares_choice(shares) if shares is not None else None
    except ValueError as exc:
        fail(f"--shares: {exc}")
    try:
        named_tiers = qos_tiers_choice(qos_tiers) if qos_tiers is not None else {}
    except ValueError as exc:
        fail(f"--qos-tiers: {exc}")
    try:
        backfill_by = backfill_by_choice(backfill_by.strip().lower())
    except ValueError as exc:
        fail(f"--backfill-by: {exc}")
    try:
        interval = _seconds_or_none(checkpoint)
    except SpecError as exc:
        fail(f"--checkpoint-interval: {exc}; or none, for jobs that never checkpoint")
    restart_cost = 0.0
    try:
        restart_cost = _seconds_or_none(restart) if restart is not None else 0.0
    except SpecError as exc:
        fail(f"--restart-cost: {exc}; or 0")
    pool_list = []
    if pools:
        try:   # a regular file, or a pipe already open (/dev/stdin, <(...)); a FIFO or a device is refused
            pool_list = load_pools(read_input(pools, MAX_POOLS_BYTES, "a pools file").decode("utf-8"), pools)
        except TraceError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"{pools}: {exc.strerror}")
        except UnicodeDecodeError as exc:
            fail(f"{pools}: byte 0x{exc.object[exc.start]:02x} is not UTF-8 (a pools file is UTF-8 YAML)")
        except PoolError as exc:
            fail(str(exc))
        inventory, pool_of = pool_gpus(pool_list)
        if gpus is not None and gpus != len(inventory):
            fail(f"--gpus {gpus} does not match the {len(inventory)} GPUs in {pools}; give one or the other")
        largest = max(p.gpus for p in pool_list)
    elif gpus is None:
        fail("say how many GPUs to simulate: --gpus N (or --pools FILE)" + _held_hint(trace))
    elif gpus < 1:
        fail(f"--gpus {gpus}: a cluster needs at least 1 GPU")
    elif gpus > MAX_GPUS:
        fail(f"--gpus {gpus}: a replay may have at most {MAX_GPUS:,} GPUs")
    else:
        inventory, pool_of, largest = cluster(gpus), None, gpus
    try:
        loaded = load_trace(trace)
    except TraceError as exc:
        fail(str(exc))
    except OSError as exc:   # there but unreadable: a folder where a file was meant, no permission
        fail(f"{trace}: {exc.strerror or exc}")
    spot = any(p.spot for p in pool_list)
    # with pools, each job runs only on the GPU type the trace gives it (a Slurm dump's gres/gpu:a100)
    types = {p.gpu_type: max(q.gpus for q in pool_list if q.gpu_type == p.gpu_type) for p in pool_list} or None
    jobs, tier_notes = with_qos_tiers(loaded.jobs, named_tiers) if named_tiers else (loaded.jobs, [])
    work = derive(jobs, cluster_gpus=largest, seed=seed, load=load, limit=limit, spot=spot,
                  notes=loaded.notes + tier_notes, estimates=asked, priorities=priorities, shares=team_shares,
                  gpu_types=types)
    if not work.jobs:
        fail(f"{trace}: no jobs to replay{_why_none(loaded, work, limit, largest)}")
    idle = sorted(set(team_shares or ()) - {j.team for j in work.jobs})
    if idle:   # a list of every account may name some that submit nothing in this period: said, not refused
        work.assumptions.append(f"teams given a share that submit no job here: {', '.join(idle)}")
    if pool_list:
        work.assumptions.append(
            f"pools: {', '.join(f'{p.name} ({p.gpus} GPUs)' for p in pool_list)}"
            + (f"; every job tolerates spot (tried first; on demand first once reclaimed more than "
               f"{Policy().spot_fallback_after} times and more than once per {SPOT_HOURS_PER_RECLAIM:g} hours run); "
               "a reclaim "
               + (f"requeues the job from its last checkpoint (every {checkpoint})" if interval > 0 else
                  "requeues the job from its start (no periodic checkpoint)")
               + (", or from the 2-minute notice, on which it saves one" if on_notice else "") if spot else ""))
    if policies is None:
        for name, why in left_out(work, inventory, pool_of, reclaim_rates(pool_list), restart_cost).items():
            if name == named_base:   # its ratios would be none, and the run would not say why
                fail(f"--base {name} is left out of this run: {why}")
            names.remove(name)
            work.assumptions.append(f"{name} left out: {why}")
    else:   # asked for by name: refused before any replay, which on a whole trace takes minutes
        for name in names:
            why_not = refused(name, inventory, pool_of, reclaim_rates(pool_list), restart_cost)
            if why_not:
                fail(why_not)
    if restart_cost:
        work.assumptions.append(f"a resumed attempt (after a preemption or a reclaim) spends {restart} reloading "
                                "its checkpoint before new work")
    if backfill_by != LIMITS and {"gqa", "gqa-slice"} & set(names):
        work.assumptions.append("gqa and gqa-slice backfill by predictions: a job's expected run time stands in "
                                "for its wall time, twice as long each time a running job outlives it; the "
                                "other policies count wall times")
    as_it_ran = _as_it_ran(work, loaded, load, len(inventory))
    eta = production_eta() if eta_sample != 0 else None
    eta_every = 1
    if eta:
        eta_every = eta_sample or max(1, len(work.jobs) // ETA_SAMPLE)
        checked = (len(work.jobs) + eta_every - 1) // eta_every
        which = "every job" if eta_every == 1 else f"every {eta_every}{_nth(eta_every)} arrival ({checked} jobs)"
        work.assumptions.append(f"ETA error: the production ETA at submit against the replayed start, for {which}")
    if report is not None:   # a policy's folder there already must take its files (an earlier run's)
        _check_report(report, names)
    results, summaries = {}, {}
    for name in names:
        began = time.perf_counter()
        try:
            result = run_policy(name, work, inventory, checkpoint_interval=interval, pool_of=pool_of,
                                reclaim_per_hour=reclaim_rates(pool_list), seed=seed, eta=eta, eta_every=eta_every,
                                save_on_notice=on_notice, restart_cost=restart_cost, backfill_by=backfill_by)
        except ValueError as exc:
            fail(str(exc))
        costs = cost(result.gpu_seconds_by_pool, pool_list) if pool_list else None
        results[name], summaries[name] = result, summarize(result, costs=costs)
        if fmt == "table":
            note(f"{name}: {len(work.jobs)} jobs replayed in {time.perf_counter() - began:.1f}s "
                 f"({result.passes} scheduling passes)")
    # the picture and the reports are written whole, all of them or none; where one cannot be, the
    # results are printed all the same before the refusal, which names the path that failed
    outputs, pages, failed, writing = Outputs(), {}, None, plot or report
    try:
        if plot:
            plot_waits(results, outputs.file(plot), f"{loaded.name}, {len(inventory)} GPUs", Path(plot).suffix)
        if report:
            writing = report
            pages = _reports(results, work, inventory, loaded.name, report, outputs)
        outputs.commit()
    except OSError as exc:   # named by the path that failed, where the error has one
        failed = f"{outputs.final_name(exc.filename) or writing}: {exc.strerror or exc}"
        outputs.discard()
        pages = {}
    except BaseException:   # interrupted: nothing half-written left either
        outputs.discard()
        raise
    if fmt == "table":
        for name, page in pages.items():
            note(f"{name}: report in {page}")
    if fmt == "json":
        data = {**as_json(loaded.name, len(inventory), len(work.jobs), work.assumptions, summaries, asked.mode, base,
                          as_it_ran), "backfill_by": backfill_by}
        print_json({**data, "reports": pages} if report and not failed else data)
    else:
        print_table(console(), loaded.name, len(inventory), len(work.jobs), work.assumptions, summaries, base,
                    as_it_ran)
    if failed:
        fail(failed)


def _reports(results, work, inventory, trace: str, directory: str, outputs) -> dict[str, str]:
    """Each policy's replay as a report over the trace's whole span, in DIR/<policy>/ once `outputs`
    commits (written meanwhile in a folder it stages beside it)."""
    from gqa.reporting import ReportInput, build, pools_of, write_report
    from gqa.sim.summaries import job_summaries

    pages = {}
    for name, result in results.items():
        rows = job_summaries(result, work)
        since = min(r.submitted_at for r in rows)
        until = max([r.ended_at for r in rows if r.ended_at is not None] + [r.submitted_at for r in rows]) + 1.0
        built = build(ReportInput(rows, since=since, until=until, now=until, pools=pools_of(inventory),
                                  title=f"{trace} replayed under {name}", relative=True, notes=work.assumptions))
        final = Path(directory) / name
        written = write_report(built, outputs.folder(final))
        pages[name] = str(final / written.page.name)
    return pages


NONE = ("0", "0s", "none", "never")


def _seconds_or_none(text: str) -> float:
    """A duration (bare numbers are seconds), or 0 for none: no periodic checkpoint, no reload."""
    from gqa.models.units import parse_duration

    return 0.0 if text.strip().lower() in NONE else float(parse_duration(text, bare_unit="s"))


def _check_plot(path: str) -> None:
    from gqa.sim.report import plot_path_problem

    problem = plot_path_problem(path)
    if problem:
        fail(f"--plot {path}: {problem}")


def _check_report(path: str, policies: list[str] | None = None) -> None:
    """The folder, or the first of its parents that exists, is a folder (the rest are made), and it
    can be made and written in, as can each policy's folder in it that is there already."""
    from gqa.sim.outputs import cannot_make

    where = Path(path)
    try:   # a name too long for the file system is an OSError, not False
        existing = next((p for p in (where, *where.parents) if p.exists()), Path("."))
        there = [where] + [where / name for name in policies or () if (where / name).exists()]
    except OSError as exc:
        fail(f"--report {path}: cannot be written ({exc.strerror or exc})")
    if not existing.is_dir():
        fail(f"--report {path}: {existing} is not a folder")
    for folder in there:
        if folder.exists() and not folder.is_dir():
            fail(f"--report {path}: {folder} is not a folder")
        problem = cannot_make(folder)
        if problem is not None:
            which = "" if folder == where else f"{folder} "
            fail(f"--report {path}: {which}cannot be written ({problem.strerror or problem})")


def _why_none(loaded, work, limit: int | None, largest: int) -> str:
    """Why a trace left no job to replay, for the refusal: too wide for the cluster, left out by its
    loader, or dropped as the workload was derived (a GPU type no pool has)."""
    considered = loaded.jobs[:limit] if limit else loaded.jobs
    too_wide = sum(1 for job in considered if job.gpus > largest)
    if too_wide:
        who = "its job asks" if too_wide == 1 else f"all {too_wide} jobs ask"
        return f": {who} for more than {largest} GPUs, the largest gang this cluster can start"
    if not considered and loaded.notes:   # the loader left every row out: say why, not what it merged
        said = [line for line in loaded.notes if line.startswith("dropped ")] or loaded.notes[:1]
        return f" ({'; '.join(said)})"
    dropped = [line for line in work.assumptions if line.startswith("dropped ")]
    return f" ({'; '.join(dropped)})" if dropped else ""


def _as_it_ran(work, loaded, load: float, gpus: int) -> dict | None:
    """What the trace records of the replayed jobs (a Slurm dump's or gqa history's starts and ends),
    said in the assumptions; None, and said, where --load moves the arrivals or where the replay's
    `gpus` are fewer than the jobs held at once as they ran (not the cluster they ran on)."""
    from gqa.sim.metrics import most_held, recorded

    if load != 1.0:
        if any(j.started is not None for j in loaded.jobs):
            work.assumptions.append(f"as it ran: not shown, as --load {load:g} moves the arrivals")
        return None
    as_it_ran = recorded(work.jobs, loaded.jobs)
    if as_it_ran is None:
        return None
    held = most_held(loaded.jobs)
    if held is not None and gpus < held:
        work.assumptions.append(f"as it ran: not shown, as the jobs held {held} GPUs at once as they ran, more "
                                f"than the {gpus} replayed: give --gpus the GPUs their cluster had")
        return None
    work.assumptions.append(f"as it ran: the trace's own starts and ends of the {as_it_ran['jobs']} jobs "
                            "replayed, on the cluster they ran on (with its nodes, CPUs, memory and any "
                            f"other work), measured as a replay is; they held at most {held} GPUs at once")
    return as_it_ran


def _held_hint(trace: str) -> str:
    """For a trace that records its runs (a Slurm dump): the most GPUs they held at once, the least
    the cluster had. Read only to word the refusal; a trace that cannot be read says nothing here."""
    from gqa.sim import load_trace
    from gqa.sim.metrics import most_held
    from gqa.sim.trace import TraceError, records_runs

    try:   # only a format that records runs is read: a published trace could take seconds for nothing
        held = most_held(load_trace(trace).jobs) if records_runs(Path(trace)) else None
    except (TraceError, OSError):
        return ""
    return f"; {trace}'s jobs held {held} GPUs at once at the most, so its cluster had at least that" if held else ""


def _nth(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
