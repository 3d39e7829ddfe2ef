"""`gqa local start|stop|status`: the workstation daemon."""

import json
import os
import subprocess
import sys
import time
from typing import Annotated, Optional

import typer

from .options import Output, check_output
from .output import fail, note, print_json, user_errors

app = typer.Typer(help="Run the queue on this machine: SQLite state, jobs as child processes.",
                  no_args_is_help=True)


@app.command("start")
def start(
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="Declare N virtual GPUs instead of discovering "
                                                "them with nvidia-smi (CPU-only machines, CI).")] = None,
    gpu_type: Annotated[str, typer.Option("--gpu-type", help="Type name of the virtual GPUs.")] = "virtual",
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Run in the background.")] = False,
    grace: Annotated[float, typer.Option("--grace", help="Seconds between SIGTERM and SIGKILL.")] = 10.0,
    price: Annotated[float, typer.Option("--price", help="Cost of one GPU-hour here, for team budgets "
                                         "and approval thresholds.")] = 0.0,
):
    """Start the daemon that launches queued jobs as GPUs free up."""
    from gqa.adapters.local.lock import daemon_running
    from gqa.adapters.local.paths import StatePaths

    if grace < 0:
        fail(f"--grace must be >= 0, got {grace}")
    if price < 0:
        fail(f"--price must be >= 0, got {price}")
    paths = StatePaths.from_env()
    pid = daemon_running(paths)
    if pid is not None:
        fail(f"a gqa daemon is already running for {paths.home} (pid {pid}); `gqa local stop` first")
    inventory = _inventory(gpus, gpu_type, price)
    paths.ensure()
    described = f"{len(inventory['gpus'])} GPUs ({_describe(inventory['gpus'])})"
    if detach:
        start_background(paths, inventory, grace)
        note(f"gqa daemon started in the background with {described}; state in {paths.home}")
        return
    note(f"gqa daemon running in the foreground with {described}; state in {paths.home}; Ctrl-C stops it")
    from . import daemon

    with user_errors():
        daemon.main([str(paths.home), json.dumps(inventory), str(grace)])


@app.command("stop")
def stop(
    keep_jobs: Annotated[bool, typer.Option("--keep-jobs", help="Leave running jobs running; the next daemon "
                                            "re-adopts them. By default they are requeued from their checkpoints.")]
    = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the daemon to exit.")] = 60.0,
):
    """Stop the daemon. Running jobs get SIGTERM and go back to the queue (unless --keep-jobs)."""
    from gqa.adapters.local.lock import daemon_running
    from gqa.adapters.local.paths import StatePaths

    paths = StatePaths.from_env()
    pid = daemon_running(paths)
    if pid is None:
        note("gqa daemon is not running")
        return
    if not stop_daemon(paths, keep_jobs=keep_jobs, timeout=timeout):
        fail(f"daemon (pid {pid}) did not stop within {timeout:g}s; see {paths.daemon_log}", code=1)
    note(f"gqa daemon (pid {pid}) stopped")


def stop_daemon(paths, *, keep_jobs: bool = False, timeout: float = 60.0) -> bool:
    """Ask the daemon to stop and wait for it; False if it is still up after `timeout`."""
    from gqa.adapters.local.lock import daemon_running
    from gqa.adapters.local.wake import STOP, STOP_KEEP_JOBS, SocketWaker

    SocketWaker(paths).send(STOP_KEEP_JOBS if keep_jobs else STOP)
    deadline = time.monotonic() + timeout
    while daemon_running(paths) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@app.command("status")
def status(output: Output = "table"):
    """Is the daemon running, with which GPUs, and how many jobs in each state."""
    fmt = check_output(output)
    with user_errors():
        from .backend import LocalBackend

        be = LocalBackend()   # whatever `gqa config` says: this is the machine's own queue
        pid = be.daemon_pid()
        inventory = be.store.inventory()
        counts = dict(be.store.db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
    gpus = [{"index": g.index, "type": g.type} for g in inventory.gpus] if inventory else []
    data = {"running": pid is not None, "pid": pid, "home": str(be.paths.home), "gpus": gpus, "jobs": counts}
    if fmt == "json":
        print_json(data)
        return
    print(f"daemon: {'running (pid %d)' % pid if pid else 'stopped'}")
    print(f"state:  {be.paths.home}")
    print(f"gpus:   {len(gpus)}" + (f" ({_describe(gpus)})" if gpus else ""))
    print("jobs:   " + (", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"))


def _inventory(gpus: int | None, gpu_type: str, price: float = 0.0) -> dict:
    from gqa.adapters.local.executor import discover_gpus

    if gpus is not None:
        if gpus < 1 or gpus > 1024:
            fail(f"--gpus must be between 1 and 1024, got {gpus}")
        found = [(i, gpu_type) for i in range(gpus)]
    else:
        found = discover_gpus()
        if not found:
            fail("no NVIDIA GPUs found (nvidia-smi); declare virtual ones with `gqa local start --gpus N`")
    return {"gpus": [{"index": i, "type": t, "price": price} for i, t in found], "cpus": os.cpu_count(),
            "memory": _memory()}


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def _describe(gpus: list[dict]) -> str:
    from collections import Counter

    return ", ".join(f"{n} {t}" for t, n in Counter(g["type"] for g in gpus).items())


def start_background(paths, inventory: dict, grace: float) -> int:
    """Start the daemon as a background process; return its pid once it answers."""
    from gqa.adapters.local.lock import daemon_running

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(paths.daemon_log, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cli.daemon", str(paths.home), json.dumps(inventory),
                                 str(grace)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True, env=env)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = paths.daemon_log.read_text(errors="replace").splitlines()[-5:]
            fail("the daemon exited at start:\n  " + "\n  ".join(tail), code=1)
        if daemon_running(paths) == proc.pid and _ready(paths):
            return proc.pid
        time.sleep(0.02)
    fail(f"the daemon did not become ready in 20s; see {paths.daemon_log}", code=1)


def _ready(paths) -> bool:
    from gqa.adapters.local.wake import SocketWaker

    return SocketWaker(paths).send(b"ping")
