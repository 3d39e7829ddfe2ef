"""Fault injection for the chaos tests: GQA_FAULT_AT="step[:n]" makes the
daemon kill itself with SIGKILL the n-th time (default 1st) it passes a
step of a launch or a settlement (Supervisor.probe names them: claimed,
spawned, recorded, released, exits-read, exits-recorded). Unset, it costs
nothing."""

import os
import signal
from collections.abc import Callable

VARIABLE = "GQA_FAULT_AT"


def probe_from_env(env: dict[str, str] | None = None) -> Callable[[str], None] | None:
    spec = (os.environ if env is None else env).get(VARIABLE, "")
    if not spec:
        return None
    step, _, nth = spec.partition(":")
    remaining = [int(nth) if nth else 1]

    def probe(name: str) -> None:
        if name == step:
            remaining[0] -= 1
            if remaining[0] <= 0:
                os.kill(os.getpid(), signal.SIGKILL)

    return probe
