"""`python -m daemon --home DIR --inventory JSON [--grace S] [--system]
[--log-max-size SIZE] [--log-files N] [--keep-history DAYS] [--notices-file PATH] [--lock-fd FD]`: what
`gqa local start` runs.

Wires the local backend (wiring.py), takes the home's lock, and runs the
loop. Every file it creates is private to its owner (umask 077); on a
shared box (--system) the request socket is open to every user of the
machine, and each request is authorised as on AWS."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

log = logging.getLogger("gqa.daemon")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m daemon", description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--inventory", required=True, help="JSON: {gpus: [{index, type, price}], cpus, memory}")
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--system", action="store_true")
    parser.add_argument("--log-max-size", default=None)
    parser.add_argument("--log-files", type=int, default=None)
    parser.add_argument("--keep-history", type=float, default=90.0, help="days a finished job is kept (0: for good)")
    # a file, not the settings themselves: a webhook's URL is a secret, and every user sees a process's arguments
    parser.add_argument("--notices-file", default=None,
                        help="how notices go out: the private JSON file `gqa local start` wrote (NoticeSettings)")
    parser.add_argument("--lock-fd", type=int, default=None,
                        help="the home's lock, taken by `gqa local start` before it wrote the inventory")
    return parser.parse_args(argv)


def inventory_of(text: str):
    from gqa.settings_codec import inventory_from

    return inventory_from(text)


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    os.umask(0o077)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _outlive_hangups()
    from gqa.models.errors import GqaError

    try:
        run(args)
    except GqaError as exc:
        log.error("%s", exc)
        sys.stderr.write(f"gqa: error: {exc}\n")
        sys.exit(getattr(exc, "exit_code", 2))


def _outlive_hangups() -> None:
    """SIGHUP (its terminal closed, a reload by habit) and SIGUSR1 would end the daemon
    unannounced, its socket left and its jobs unwatched, and systemd counts that a
    clean exit: logged and ignored instead. A handler, not SIG_IGN, which jobs would
    inherit across exec."""
    def said(signum, _frame) -> None:
        log.info("%s ignored: the daemon stops on SIGTERM (`gqa local stop`), SIGINT or SIGUSR2 (jobs left running)",
                 signal.Signals(signum).name)

    for signum in (signal.SIGHUP, signal.SIGUSR1):
        signal.signal(signum, said)


def run(args: argparse.Namespace, ready=None) -> None:
    from cli.daemon_socket import address
    from gqa.adapters.local.containment import choose_containment
    from gqa.adapters.local.lock import acquire_lock
    from gqa.adapters.local.log_watch import LogWatch
    from gqa.adapters.local.notice_channels import read_settings
    from gqa.adapters.local.notice_sender import NoticeSender
    from gqa.adapters.local.paths import StatePaths
    from gqa.adapters.local.wake import Doorbell

    from .faults import probe_from_env
    from .loop import DaemonLoop
    from .requests import RequestHandler
    from .server import MAX_PER_USER, RequestServer
    from .submit_command import SubmitCommand
    from .wiring import DaemonWiring

    from gqa.adapters.local.system import is_system

    paths = StatePaths(Path(args.home))
    acquire_lock(paths, args.lock_fd)   # held for the daemon's life: its descriptor is never closed
    system = args.system or is_system(paths.home)   # a shared box's home says so itself
    containment = choose_containment(instance=str(paths.home))
    log.info("%s", containment.describe())
    notices = read_settings(args.notices_file)
    log.info("%s", notices.describe())
    wiring = DaemonWiring(paths, inventory_of(args.inventory), args.grace, containment=containment,
                          system=system, probe=probe_from_env(), keep_history=args.keep_history, notices=notices)
    # a cached property: reading it opens (and checks) the database before anyone is answered
    wiring.store   # noqa: B018
    limits = _log_limits(args)
    if limits is not None:
        log.info("%s", limits.describe())
    _settle_rotations(paths.logs)

    def status() -> dict:
        return {"pid": os.getpid(), "home": str(paths.home), "containment": containment.describe(),
                "logs": limits.describe() if limits is not None else "", "system": system,
                "troubles": wiring.troubles.told()}   # what fails now (a full disk), for those who look

    router = principal = None
    mode, per_user = 0o600, None   # a personal queue's socket serves its owner alone
    if system:
        from gqa.adapters.local.system import socket_mode

        from .callers import local_access, principal_for
        from .routes import Router

        policy = local_access(paths.home)
        router = Router(wiring, policy)
        principal = lambda peer: principal_for(peer.uid, peer.gid, policy)   # noqa: E731
        mode, per_user = socket_mode(paths.home), MAX_PER_USER   # open to every user: none may hold it all
    handler = RequestHandler(SubmitCommand(wiring.submitter()), status, router, principal)
    server = RequestServer(address(str(paths.home)), handler, mode=mode, max_per_user=per_user)
    from .observers import observers_for

    # notices go out on a thread of their own, from an outbox the job's moves are written into
    sender = NoticeSender(paths.db, notices)
    alerts = wiring.notifier if notices.alerts_to else None   # else the daemon's log (LogNotifier)
    # running jobs' logs are capped on a thread of their own, as they are written (after the settling above)
    log_watch = LogWatch(limits)
    sender.start()
    log_watch.start()
    try:
        DaemonLoop(wiring, server, Doorbell(paths), log_watch=log_watch,
                   observers=observers_for(wiring, alerts)).run(ready)
    finally:
        log_watch.stop()
        sender.stop()


def _log_limits(args):
    from gqa.adapters.local.log_rotation import LogLimits

    return LogLimits.parse(args.log_max_size or "100M", 2 if args.log_files is None else args.log_files)


def _settle_rotations(logs) -> None:
    """Rotations the daemon was killed in the middle of: finished or undone
    before any job's output is read again, those of jobs that ended since included."""
    from gqa.adapters.local import log_recovery

    for path, outcome in log_recovery.finish_all(logs):
        if isinstance(outcome, OSError):
            log.warning("cannot settle the rotation left half done of %s: %s", path, outcome)
        elif outcome is not None:
            log.info("the rotation left half done of %s was %s", path, outcome)


if __name__ == "__main__":
    main()
