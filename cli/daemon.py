"""The local daemon: an event loop that wires the SQLite store and the
process executor to the Supervisor service. It sleeps in epoll until the
doorbell rings (a submit, cancel or requeue), a job's pidfd reports an
exit, or the next deadline (wall time, retry backoff, forced kill) comes."""

import logging
import os
import selectors
import signal
import sys
import time

from gqa.adapters.clock import SystemClock, SystemRandom
from gqa.adapters.local.executor import LocalExecutor
from gqa.adapters.local.lock import acquire_lock
from gqa.adapters.local.paths import StatePaths
from gqa.adapters.local.store import SqliteStore
from gqa.adapters.local.wake import STOP, STOP_KEEP_JOBS, Doorbell
from gqa.models.job import JobState
from gqa.ports import Inventory
from gqa.services.supervisor import Supervisor

log = logging.getLogger("gqa.daemon")
IDLE_CHECK = 30.0  # seconds; a safety net, nothing relies on it


def run(paths: StatePaths, inventory: Inventory, *, grace: float, lock_fd: int, ready=None) -> None:
    store = SqliteStore(paths.db)
    store.set_inventory(inventory)
    executor = LocalExecutor(paths, inventory)
    supervisor = Supervisor(store, executor, SystemClock(), SystemRandom(), grace=grace)
    doorbell = Doorbell(paths)
    stop_r, stop_w = os.pipe()
    os.set_blocking(stop_w, False)
    signal.set_wakeup_fd(stop_w)
    stopping = {"requested": False, "keep_jobs": False}

    def on_signal(signum, frame):
        stopping["requested"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    selector = selectors.DefaultSelector()
    selector.register(doorbell.fileno(), selectors.EVENT_READ, "doorbell")
    selector.register(stop_r, selectors.EVENT_READ, "signal")
    from . import main as _warm  # noqa: F401  (import the CLI now, not on the first submit)
    from .server import CommandServer

    commands = CommandServer(paths)
    selector.register(commands.fileno(), selectors.EVENT_READ, "cli")
    watched: set[int] = set()
    unrecorded: list = []

    counts = supervisor.recover()
    for job in store.list([JobState.RUNNING]):  # re-adopted attempts
        executor.adopt(job)
    log.info("daemon %d up: %d GPUs, recovered %s", os.getpid(), len(inventory.gpus), counts)
    if ready is not None:
        ready()
    try:
        while True:
            if stopping["requested"]:
                if _shutdown(supervisor, executor, selector, watched, keep_jobs=stopping["keep_jobs"], grace=grace):
                    break
            else:
                try:
                    supervisor.promote_retries()
                    supervisor.carry_out_requests()
                    supervisor.enforce_wall_time()
                    supervisor.dispatch()
                except Exception:  # e.g. the database briefly locked past its timeout: log, retry soon
                    log.exception("scheduling step failed; retrying")
                    time.sleep(0.5)
            executor.kill_overdue()
            _sync_watches(selector, executor, watched)
            events = selector.select(_timeout(supervisor, executor, stopping["requested"]))
            exits = []
            for key, _ in events:
                if key.data == "doorbell":
                    for message in doorbell.drain():
                        if message in (STOP, STOP_KEEP_JOBS):
                            stopping["requested"] = True
                            stopping["keep_jobs"] = message == STOP_KEEP_JOBS
                elif key.data == "signal":
                    os.read(stop_r, 512)
                elif key.data == "cli":
                    commands.handle()
                else:
                    # unregister before the fd is closed, so a reused fd number is never stale
                    selector.unregister(key.fd)
                    watched.discard(key.fd)
                    ended = executor.collect(key.fd)
                    if ended is not None:
                        exits.append(ended)
            unrecorded += exits
            if unrecorded:
                try:
                    supervisor.on_exits(unrecorded)
                    unrecorded = []
                except Exception:  # keep them and try again on the next turn
                    log.exception("recording exits failed: %s", unrecorded)
                    time.sleep(0.5)
    finally:
        commands.close()
        doorbell.close()
        store.close()
        log.info("daemon %d stopped", os.getpid())


def _sync_watches(selector, executor: LocalExecutor, watched: set[int]) -> None:
    current = set(executor.fds())
    for fd in watched - current:
        try:
            selector.unregister(fd)
        except (KeyError, ValueError):
            pass
    for fd in current - watched:
        selector.register(fd, selectors.EVENT_READ, "exit")
    watched.clear()
    watched.update(current)


def _timeout(supervisor: Supervisor, executor: LocalExecutor, stopping: bool) -> float:
    waits = [IDLE_CHECK]
    deadline = None if stopping else supervisor.next_deadline()
    if deadline is not None:
        waits.append(max(0.0, deadline - time.time()))
    kill = executor.next_kill()
    if kill is not None:
        waits.append(kill)
    if stopping:
        waits.append(0.2)
    return min(waits)


def _shutdown(supervisor, executor, selector, watched, *, keep_jobs: bool, grace: float) -> bool:
    """True once nothing is left to wait for."""
    supervisor.shutdown(keep_jobs=keep_jobs)
    return keep_jobs or executor.watched() == 0


def main(argv: list[str] | None = None) -> None:
    """`python -m cli.daemon GQA_HOME INVENTORY_JSON GRACE` (what `gqa local start --detach` runs)."""
    import json

    from gqa.scheduling.snapshot import Gpu

    home, inventory_json, grace = (argv or sys.argv[1:])[:3]
    paths = StatePaths(__import__("pathlib").Path(home))
    data = json.loads(inventory_json)
    inventory = Inventory(gpus=tuple(Gpu(**g) for g in data["gpus"]), cpus=data.get("cpus"), memory=data.get("memory"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lock = acquire_lock(paths)
    run(paths, inventory, grace=float(grace), lock_fd=lock)


if __name__ == "__main__":
    main()
