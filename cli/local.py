"""`gqa local start|stop|status`: the workstation daemon."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app as gqa
from .options import Output, check_output
from .output import fail, note, print_json, user_errors
from .prices import KWH_HELP, PRICE_HELP, WATTS_HELP, kept_prices, price_rules, priced

app = typer.Typer(help="Run the queue on this machine: SQLite state, jobs as child processes.",
                  no_args_is_help=True)
gqa.add_typer(app, name="local")
NOTICES = "Notifications"
STATUS_TIMEOUT = 3.0   # seconds for the daemon to say how it is: it answers at once unless stopped or hung


@app.command("start")
def start(
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="Declare N virtual GPUs instead of discovering "
                                                "them with nvidia-smi (CPU-only machines, CI).")] = None,
    gpu_type: Annotated[str, typer.Option("--gpu-type", help="Type name of the virtual GPUs.")] = "virtual",
    cpus: Annotated[Optional[int], typer.Option("--cpus", help="CPUs jobs may use together (default: this "
                                                "machine's); a job asking for more is refused.")] = None,
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Run in the background.")] = False,
    grace: Annotated[float, typer.Option("--grace", help="Seconds between SIGTERM and SIGKILL.")] = 10.0,
    prices: Annotated[Optional[list[str]], typer.Option("--price", metavar="[TYPE=]PRICE", help=PRICE_HELP + " For "
                                                        "team budgets, approvals and gqa cost; without any price "
                                                        "option the prices the queue had are kept.")] = None,
    kwh_price: Annotated[Optional[float], typer.Option("--kwh-price", help=KWH_HELP)] = None,
    watts: Annotated[Optional[list[str]], typer.Option("--watts", metavar="[TYPE=]WATTS", help=WATTS_HELP)] = None,
    log_max_size: Annotated[str, typer.Option("--log-max-size", help="Cap on each job's log: past it the "
                                              "log is rotated (100M, 1G).")] = "100M",
    log_files: Annotated[int, typer.Option("--log-files", help="Rotated parts of a job's log kept beyond "
                                           "the live one.")] = 2,
    keep_history: Annotated[int, typer.Option("--keep-history", metavar="DAYS", help="Finished jobs are deleted, "
                                              "with their history, this many days after they end (0: kept for "
                                              "good).")] = 90,
    system: Annotated[bool, typer.Option("--system", help="One queue for every user of this machine (root "
                                         "only): jobs run as the users who submit them.")] = False,
    home: Annotated[Optional[str], typer.Option("--home", help="With --system: where the queue keeps its "
                                                "state.", show_default="/var/lib/gqa")] = None,
    admin_groups: Annotated[Optional[list[str]], typer.Option("--admin-group", help="With --system: members of "
                                                              "this Unix group administer the queue "
                                                              "(repeatable).")] = None,
    approver_groups: Annotated[Optional[list[str]], typer.Option("--approver-group", help="With --system: members "
                                                                 "of this Unix group approve and deny jobs "
                                                                 "(repeatable).")] = None,
    smtp: Annotated[Optional[str], typer.Option("--smtp", help="HOST:PORT of the mail server that sends job "
                                                "notices.", rich_help_panel=NOTICES)] = None,
    mail_from: Annotated[Optional[str], typer.Option("--mail-from", help="The notices' sender address.",
                                                     rich_help_panel=NOTICES)] = None,
    smtp_starttls: Annotated[bool, typer.Option("--smtp-starttls", help="Encrypt with STARTTLS before sending.",
                                                rich_help_panel=NOTICES)] = False,
    smtp_login_file: Annotated[Optional[str], typer.Option("--smtp-login-file", help="A private file (chmod 600) "
                                                           "whose first line is USER:PASSWORD.",
                                                           rich_help_panel=NOTICES)] = None,
    mail_domain: Annotated[Optional[str], typer.Option("--mail-domain", help="A job that names no address is "
                                                       "mailed to OWNER@DOMAIN.", rich_help_panel=NOTICES)] = None,
    webhook: Annotated[Optional[str], typer.Option("--webhook", help="A URL Slack-style {\"text\"} notices are "
                                                   "POSTed to when a job names no address and there is no "
                                                   "--mail-domain.", rich_help_panel=NOTICES)] = None,
    alerts_to: Annotated[Optional[str], typer.Option("--alerts-to", help="An address or webhook URL for alerts "
                                                     "and approval requests.", rich_help_panel=NOTICES)] = None,
    output: Output = "table",
):
    """Start the daemon that launches queued jobs as GPUs free up."""
    from gqa.adapters.local.lock import daemon_running
    from gqa.adapters.local.paths import StatePaths

    fmt = check_output(output)
    if not 0 <= grace < float("inf"):   # NaN too: the daemon would wait on it when it stops a job
        fail(f"--grace must be a number of seconds >= 0, got {grace:g}")
    if keep_history < 0:
        fail(f"--keep-history must be a number of days >= 0 (0: keep every job), got {keep_history}")
    rules = price_rules(prices, kwh_price, watts)
    # checked before anything is written: a mistake is one line, not a daemon that dies
    notices = _notice_settings(smtp=smtp, mail_from=mail_from, starttls=smtp_starttls,
                               login_file=smtp_login_file, mail_domain=mail_domain, webhook=webhook,
                               alerts_to=alerts_to)
    os.umask(0o077)     # the daemon's files are its own; a system queue sets the modes others need
    made: list[Path] = []
    if system:
        paths = _system_home(home, admin_groups or [], approver_groups or [])
    elif home or admin_groups or approver_groups:
        fail("--home, --admin-group and --approver-group go with --system "
             "(a user's own queue lives in GQA_HOME, default ~/.gqa)")
    else:
        from gqa.adapters.local.system import private_home

        paths = StatePaths.from_env()
        made = _not_there(paths)
        with user_errors(), _removed_on_fault(paths, made):
            private_home(paths.home, tighten=True)
    # an unusable home or queue database is one line here, not a daemon that dies
    with user_errors(), _removed_on_fault(paths, made):
        _not_running(paths, daemon_running(paths))
        inventory = _inventory(gpus, gpu_type, cpus=cpus)
        options = _daemon_options(log_max_size, log_files) + ["--keep-history", str(keep_history)]
        paths.ensure()
        # the inventory is written only under the home's lock, which the daemon then inherits: of two
        # starts at once, the one refused writes nothing over the queue the other started
        lock = _record_inventory(paths, inventory, rules, lock=lambda: _take_lock(paths))
        options += _notice_options(paths, notices, lock)
    described = f"{len(inventory['gpus'])} GPUs ({_describe(inventory['gpus'])})"
    started = {"home": str(paths.home), "gpus": len(inventory["gpus"]), "detached": detach}
    if detach:
        started["pid"] = start_background(paths, inventory, grace, options, lock=lock)
        if fmt == "json":
            print_json(started)
            return
        note(f"gqa daemon started in the background with {described}; state in {paths.home}")
        _print_containment(paths)
        return
    if fmt == "json":       # before the daemon's own lines: one object, then it runs here
        print_json(started | {"pid": os.getpid()})
        sys.stdout.flush()
    note(f"gqa daemon running in the foreground with {described}; state in {paths.home}; Ctrl-C stops it")
    from daemon.main import main as run_daemon

    run_daemon(daemon_args(paths, inventory, grace, options) + ["--lock-fd", str(lock)])


def _not_there(paths) -> list[Path]:
    """What a start makes in a user's home that is not there yet, the directories first."""
    db = paths.db
    made = [paths.home, paths.logs, paths.checkpoints, paths.exits,
            db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"), paths.queue_id]
    return [p for p in made if not os.path.lexists(p)]


@contextmanager
def _removed_on_fault(paths, made: list[Path]):
    """A start its storage refuses (a full disk, an unwritable home) says "nothing was changed":
    what it made is removed again, as long as the queue database it began is still empty."""
    from gqa.models.errors import StorageBusy, StorageCorrupt, StorageUnavailable

    try:
        yield
    except StorageUnavailable as exc:
        if not isinstance(exc, (StorageBusy, StorageCorrupt)):   # another process's queue, or a damaged one
            _remove_made(paths, made)
        raise


def _remove_made(paths, made: list[Path]) -> None:
    try:
        no_queue = paths.db in made and os.stat(paths.db).st_size == 0
    except FileNotFoundError:
        no_queue = True
    except OSError:
        return
    for path in reversed(made):   # the files, then the directories they were in
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()      # only an empty one: anything put there since stays
            elif no_queue:
                path.unlink()
        except OSError:
            pass


def _not_running(paths, pid: int | None) -> None:
    if pid is not None:
        fail(f"a gqa daemon is already running for {paths.home} (pid {pid}); `gqa local stop` first")


def _take_lock(paths) -> int:
    """The home's lock for the daemon about to start; refused while another daemon, or start, holds it."""
    from gqa.adapters.local.lock import AlreadyRunning, take_lock

    try:
        return take_lock(paths)
    except AlreadyRunning as exc:
        if exc.pid is None:
            fail(f"a gqa daemon is already starting for {paths.home} (another `gqa local start`); "
                 "`gqa local status` shows it once it runs")
        _not_running(paths, exc.pid)
        raise


def _system_home(home: str | None, admin_groups: list[str], approver_groups: list[str]):
    """`gqa local start --system`: the shared queue's home laid out (root only)."""
    from gqa.adapters.local.accounts import unknown_groups
    from gqa.adapters.local.paths import StatePaths
    from gqa.adapters.local.system import SYSTEM_HOME, SystemSettings, lay_out_system

    if os.geteuid() != 0:
        fail("--system starts the queue for every user of this machine and needs root (sudo gqa local start "
             "--system ...); for a queue of your own, leave out --system")
    unknown = unknown_groups(admin_groups + approver_groups)
    if unknown:
        fail(f"no Unix group named {', '.join(unknown)} on this machine (groupadd, or check the name)")
    paths = StatePaths(Path(home or SYSTEM_HOME).absolute())
    with user_errors():
        lay_out_system(paths.home, SystemSettings(tuple(admin_groups), tuple(approver_groups)))
    return paths


@app.command("stop")
def stop(
    keep_jobs: Annotated[bool, typer.Option("--keep-jobs", help="Leave running jobs running; the next daemon "
                                            "re-adopts them. By default they are requeued from their checkpoints.")]
    = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the daemon to exit.")] = 60.0,
    force: Annotated[bool, typer.Option("--force", help="Kill the daemon at once (SIGKILL). Running jobs keep "
                                        "running; the next daemon re-adopts them.")] = False,
    output: Output = "table",
):
    """Stop the daemon. Running jobs get SIGTERM and go back to the queue (unless --keep-jobs)."""
    from gqa.adapters.local.lock import daemon_running

    fmt = check_output(output)
    if not 0 <= timeout < float("inf"):
        fail(f"--timeout must be a number of seconds >= 0, got {timeout:g}")
    with user_errors():
        paths = _commands_home()
        _may_stop(paths)
        pid = daemon_running(paths)
        if pid is None:
            if fmt == "json":
                print_json({"pid": None, "stopped": False, "running": False})
            else:
                note("gqa daemon is not running")
            return
        # a stop that requeues them waits for their ends: any still running after it was not stopped
        running = [] if keep_jobs or force else _job_processes(paths)
        stopped = stop_daemon(paths, keep_jobs=keep_jobs, timeout=timeout, force=force)
    if not stopped:
        fail(f"daemon (pid {pid}) did not stop within {timeout:g}s (running jobs get their grace period first); "
             f"see {paths.daemon_log}, or `gqa local stop --force`", code=1)
    left = _still_running(running)
    if left:
        fail(f"gqa daemon (pid {pid}) stopped, but could not stop {_jobs_named(left)}: still running, as "
             f"--keep-jobs leaves them, and the next `gqa local start` adopts them; see {paths.daemon_log}",
             code=1)
    if fmt == "json":
        print_json({"pid": pid, "stopped": True, "running": False})
        return
    note(f"gqa daemon (pid {pid}) stopped")


def _commands_home():
    """The queue `stop` and `status` act on: the one every other command uses
    (GQA_HOME, ~/.gqa, else a shared box's system queue)."""
    from gqa.adapters.local.paths import StatePaths
    from gqa.adapters.local.system import state_home

    return StatePaths(state_home())


def _may_stop(paths) -> None:
    """Stopping is a signal to the daemon: a system queue's is root's, so only root may send it."""
    from gqa.adapters.local.system import is_system

    if os.geteuid() != 0 and is_system(paths.home):
        fail(f"the queue at {paths.home} serves every user of this machine; only root stops it "
             "(sudo gqa local stop)")


def _job_processes(paths) -> list[tuple[str, int, str]]:
    """The running jobs' processes (id, pid, start token) as the store has them; none
    where it cannot be read (the stop goes ahead: the daemon's log says what it did)."""
    from gqa.adapters.local.store import SqliteStore
    from gqa.models.errors import GqaError
    from gqa.models.job import JobState

    try:
        store = SqliteStore(paths.db)
    except GqaError:
        return []
    try:
        jobs = store.list([JobState.STARTING, JobState.RUNNING])
    except GqaError:
        return []
    finally:
        store.close()
    return [(j.id, j.pid, j.proc_token) for j in jobs if j.pid is not None and j.proc_token]


def _still_running(processes: list[tuple[str, int, str]]) -> list[str]:
    from gqa.adapters.local.processes import process_token

    return [job_id for job_id, pid, token in processes if process_token(pid) == token]


def _jobs_named(ids: list[str]) -> str:
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return f"job {shown}" if len(ids) == 1 else f"jobs {shown}"


def stop_daemon(paths, *, keep_jobs: bool = False, timeout: float = 60.0, force: bool = False) -> bool:
    """Ask the daemon to stop and wait for it; False if it is still up after `timeout`.
    A signal, not a message: it reaches a daemon however busy its sockets are
    (SIGTERM: requeue running jobs; SIGUSR2: leave them running; SIGKILL with
    `force`: stop now, jobs keep running and the next daemon adopts them)."""
    import signal

    from gqa.adapters.local.lock import daemon_running
    from gqa.models.errors import NotPermitted

    pid = daemon_running(paths)
    if pid is None:
        return True
    sig = signal.SIGKILL if force else signal.SIGUSR2 if keep_jobs else signal.SIGTERM
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return True
    except PermissionError:
        raise NotPermitted(f"the gqa daemon (pid {pid}) runs as another user; only it or root may stop it") from None
    deadline = time.monotonic() + timeout
    while daemon_running(paths) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@app.command("status")
def status(output: Output = "table"):
    """Is the daemon running, with which GPUs, and how many jobs in each state."""
    from gqa.adapters.local.system import is_system

    fmt = check_output(output)
    with user_errors():
        paths = _commands_home()
        if os.geteuid() != 0 and is_system(paths.home):
            data = _shared_status(paths)   # its database is root's: the daemon tells
        else:
            data = _own_status(paths)
    if fmt == "json":
        print_json(data)
        return
    gpus, outside, counts = data["gpus"], data["outside_gpus"], data["jobs"]
    print(f"daemon: {_daemon_line(data['pid'], data['answering'], paths.daemon_log)}")
    print(f"state:  {paths.home}")
    from .queue_table import outside_text

    print(f"gpus:   {len(gpus)}" + (f" ({_describe(gpus)})" if gpus else "")
          + (f"; {outside_text(outside)}" if outside else ""))
    print("jobs:   " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"))
    for line in (data["containment"], data["logs"]):
        if line:
            print(line)


def _own_status(paths) -> dict:
    """`local status` of a queue whose database this user reads."""
    from gqa.models.job import JobState

    from .local_backend import LocalBackend

    be = LocalBackend(paths.home)   # whatever `gqa config` says: this is the machine's own queue
    be.require_queue()
    pid = be.daemon_pid()
    inventory = be.store.inventory()
    counts = {state.value: n for state, n in be.store.state_counts().items()}
    held = {i for j in be.store.list([JobState.STARTING, JobState.RUNNING]) for i in j.assigned}
    gpus = [{"index": g.index, "type": g.type} for g in inventory.gpus] if inventory else []
    return _status_data(paths, pid, gpus, held, counts)


def _shared_status(paths) -> dict:
    """`local status` of a system queue for a user who may not read its database: the daemon's answers."""
    from gqa.adapters.local.lock import daemon_running

    from .daemon_backend import DaemonBackend

    pid = daemon_running(paths)
    gpus: list[dict] = []
    held: set[int] = set()
    counts: dict[str, int] = {}
    said = daemon_status(paths, timeout=STATUS_TIMEOUT) if pid is not None else None
    if said is not None:
        seen = DaemonBackend(paths.home).api.call("GET", "/overview", query={"head": 0, "events": 0})
        gpus = [{"index": g["index"], "type": g["type"]} for g in seen["gpus"]]
        held = {i for run in seen["running"] for i in run["gpus"]}
        counts = {name: n for name, n in (("running", len(seen["running"])), ("pending", seen["pending"])) if n}
    return _status_data(paths, pid, gpus, held, counts, said)


def _status_data(paths, pid: int | None, gpus: list[dict], held: set[int], counts: dict[str, int],
                 said: dict | None = None) -> dict:
    outside = len(held - {g["index"] for g in gpus})   # as `gqa queue` counts them
    if said is None and pid is not None:
        said = daemon_status(paths, timeout=STATUS_TIMEOUT)
    answering = said is not None
    said = said or {}
    return {"running": pid is not None, "pid": pid, "answering": answering, "home": str(paths.home),
            "gpus": gpus, "outside_gpus": outside, "jobs": counts, "containment": said.get("containment"),
            "logs": said.get("logs")}


def _daemon_line(pid: int | None, answering: bool, daemon_log) -> str:
    from .daemon_socket import if_stopped

    if pid is None:
        return "stopped"
    if answering:
        return f"running (pid {pid})"
    return (f"running (pid {pid}) but not answering: no answer within {STATUS_TIMEOUT:g} s"
            f"{if_stopped(pid) or f' (busy, or hung: see {daemon_log})'}")


def _inventory(gpus: int | None, gpu_type: str, price: float = 0.0, cpus: int | None = None) -> dict:
    from gqa.adapters.local.gpu_discovery import discover_gpus

    if cpus is not None and not 1 <= cpus <= 65536:
        fail(f"--cpus must be between 1 and 65536, got {cpus}")
    if gpus is not None:
        if gpus < 1 or gpus > 1024:
            fail(f"--gpus must be between 1 and 1024, got {gpus}")
        found = [(i, gpu_type) for i in range(gpus)]
    else:
        found = discover_gpus()
        if not found:
            fail("no NVIDIA GPUs found (nvidia-smi); declare virtual ones with `gqa local start --gpus N`")
    return {"gpus": [{"index": i, "type": t, "price": price} for i, t in found], "cpus": cpus or os.cpu_count(),
            "memory": _memory()}


def _record_inventory(paths, inventory: dict, rules=None, lock: Callable[[], int | None] = lambda: None) -> int | None:
    """Open the queue and write its GPUs as the daemon will, priced by the
    rules (none: each GPU keeps the price it had): a queue database that is
    missing, foreign, read-only, full or locked stops `start` here, before
    `lock()` takes the home's lock (returned) for the write and the daemon."""
    from gqa.adapters.local.store import SqliteStore
    from gqa.models.prices import PriceRules
    from gqa.settings_codec import inventory_from_dict

    store = SqliteStore(paths.db)
    try:
        priced(inventory["gpus"], rules or PriceRules(), kept_prices(store.inventory()))
        held = lock()
        try:
            store.set_inventory(inventory_from_dict(inventory))   # read as the daemon reads its --inventory
        except BaseException:
            if held is not None:
                os.close(held)
            raise
        return held
    finally:
        store.close()


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _describe(gpus: list[dict]) -> str:
    from collections import Counter

    return ", ".join(f"{n} {t}" for t, n in Counter(g["type"] for g in gpus).items())


def _daemon_options(log_max_size: str, log_files: int) -> list[str]:
    if log_files < 0:
        fail(f"--log-files must be >= 0, got {log_files}")
    with user_errors():
        from gqa.adapters.local.log_rotation import LogLimits

        LogLimits.parse(log_max_size, log_files)   # refused here, in one line, not in the daemon's log
    return ["--log-max-size", log_max_size, "--log-files", str(log_files)]


def _notice_settings(**given):
    """The notice options as NoticeSettings; a mistake is one line and exit 2, before anything is written."""
    from gqa.adapters.local.notice_channels import NoticeSettings

    if given.get("login_file"):
        given["login_file"] = os.path.abspath(given["login_file"])
    with user_errors():
        return NoticeSettings(**given)


def _notice_options(paths, settings, lock: int | None = None) -> list[str]:
    """--notices-file for the daemon: the settings in a file of the home only its user reads, not on
    its command line, which every user of the machine may read (a webhook's URL is its password).
    Written under the home's lock (`lock`, closed here if the write fails)."""
    from gqa.adapters.local.notice_channels import write_settings
    from gqa.adapters.local.storage_errors import storage_errors

    try:
        with storage_errors(paths.home):
            path = write_settings(paths.home, settings)
    except BaseException:
        if lock is not None:
            os.close(lock)
        raise
    return ["--notices-file", str(path)] if path is not None else []


def daemon_args(paths, inventory: dict, grace: float, options: Sequence[str] = ()) -> list[str]:
    return ["--home", str(paths.home), "--inventory", json.dumps(inventory), "--grace", str(grace), *options]


def start_background(paths, inventory: dict, grace: float, options: Sequence[str] = (),
                     lock: int | None = None) -> int:
    """Start the daemon as a background process; return its pid once it answers.
    `lock`: the home's lock (take_lock), handed to the daemon and closed here."""
    from gqa.adapters.local.lock import daemon_running

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    args = daemon_args(paths, inventory, grace, options) + ([] if lock is None else ["--lock-fd", str(lock)])
    try:
        with open(paths.daemon_log, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "daemon", *args],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                    close_fds=True, pass_fds=() if lock is None else (lock,), env=env)
    finally:
        if lock is not None:   # the daemon holds it now; a daemon that dies at start lets it go
            os.close(lock)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = paths.daemon_log.read_text(errors="replace").splitlines()[-5:]
            said = [line for line in tail if line.startswith("gqa: error: ")]
            if said:
                fail(said[-1][len("gqa: error: "):], code=2)
            fail(f"the daemon exited at start; see {paths.daemon_log}: {tail[-1] if tail else ''}", code=1)
        if daemon_running(paths) == proc.pid and daemon_status(paths, timeout=deadline - time.monotonic()) is not None:
            return proc.pid
        time.sleep(0.02)
    fail(f"the daemon did not become ready in 20s; see {paths.daemon_log}", code=1)


def daemon_status(paths, timeout: float | None = None) -> dict | None:
    """What the daemon says of itself (GET /daemon), or None if it does not answer
    (within `timeout` seconds: the socket's REPLY_TIMEOUT by default)."""
    from .daemon_socket import daemon_says

    return daemon_says(str(paths.home), timeout)


def _print_containment(paths) -> None:
    said = daemon_status(paths, timeout=STATUS_TIMEOUT) or {}
    for line in (said.get("containment"), said.get("logs")):
        if line:
            note(line)
