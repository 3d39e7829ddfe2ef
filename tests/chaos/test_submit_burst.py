"""50 `gqa submit` processes at once through the light client: served by the
daemon, written straight to SQLite when no daemon runs, and a `gqa local
stop` in the middle of a burst. Every client gets its id (or one line),
every job is recorded once and runs once."""

import re
import sys
import time

import pytest

from .harness import JOB, one_line_error

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.slow]

CLIENTS = 50
JOB_ID = re.compile(r"^\S+$")


def burst(chaos, n: int, during=None, seconds: float = 0.1):
    """n light clients at once, each `gqa submit --name cN -- sh -c ...`; returns
    (finished clients, seconds until the last one exited). `during` runs once all are started."""
    command = f"exec {sys.executable} {JOB} run {chaos.runs} {seconds}"
    began = time.monotonic()
    procs = [chaos.popen("submit", "--name", f"c{i}", "--", "sh", "-c", command) for i in range(n)]
    if during is not None:
        during()
    done = [chaos.collect(f"submit c{i}", p) for i, p in enumerate(procs)]
    return done, time.monotonic() - began


def ids_of(done) -> list[str]:
    bad = [(d.returncode, d.stdout, d.stderr) for d in done if d.returncode != 0 or not JOB_ID.match(d.stdout.strip())]
    assert not bad, f"{len(bad)} clients failed: {bad[:3]}"
    ids = [d.stdout.strip() for d in done]
    assert len(set(ids)) == len(ids), f"ids handed out twice: {sorted(ids)}"
    return ids


def test_fifty_clients_at_once_through_the_daemon(chaos):
    chaos.start()
    done, took = burst(chaos, CLIENTS)
    ids = ids_of(done)
    chaos.check("50 submits, daemon up", ids, once=True, burst_s=round(took, 2))


def test_fifty_clients_at_once_without_a_daemon(chaos):
    chaos.start()            # the queue exists, with its GPUs; then its daemon goes away
    assert chaos.stop()
    done, took = burst(chaos, CLIENTS)
    ids = ids_of(done)
    assert sorted(chaos.jobs()) == sorted(ids)
    assert all(j.state.value == "QUEUED" for j in chaos.jobs().values())
    chaos.start()
    chaos.check("50 submits, no daemon", ids, once=True, burst_s=round(took, 2))


def test_stop_during_a_burst_stops_in_time(make_chaos):
    # jobs long enough that none ends by itself while the stop is under way (that race is
    # test_stop_and_exit.py's): every run the stop interrupts is killed before its end line
    chaos = make_chaos(gpus=8)
    chaos.start()
    stopped = {}

    def stop():
        time.sleep(0.5)
        began = time.monotonic()
        proc = chaos.cli("local", "stop", "--timeout", "20")
        stopped.update(rc=proc.returncode, seconds=time.monotonic() - began, stderr=proc.stderr)

    done, took = burst(chaos, 20, during=stop, seconds=1.5)
    assert stopped["rc"] == 0 and stopped["seconds"] < 20, stopped
    printed = [d.stdout.strip() for d in done if d.returncode == 0]
    refused = [d for d in done if d.returncode != 0]
    assert all(one_line_error(d) for d in refused), [d.stderr for d in refused]
    assert all(JOB_ID.match(i) for i in printed) and len(set(printed)) == len(printed)

    recorded = sorted(chaos.jobs())
    assert set(printed) <= set(recorded), "a client was given an id that was never recorded"
    assert len(recorded) - len(printed) <= len(refused), "more jobs than clients that asked"
    chaos.start()
    # `stop` requeues the running jobs (SIGTERM): a job may start again, never while its first run lives
    chaos.check("stop during 20 submits", recorded, once=False, burst_s=round(took, 2),
                stop_s=round(stopped["seconds"], 2), refused=len(refused))
