"""Trace replay: real cluster traces through the production scheduling pass.

    trace = load_trace("raw-traces.tar.gz")           # what happened: arrivals, durations, GPUs
    work = derive(trace.jobs, cluster_gpus=1300)      # what traces lack: wall times, teams, users
    result = simulate(work, gpus(1300), preset("gqa"))
    summary = summarize(result)

Every ordering, quota, gang and backfill decision is `gqa.scheduling.plan()`'s;
this package only keeps the clock, the GPUs and the books. The one exception is
a baseline: `las` (Tiresias' 2D-LAS, las.py) is its own replay. By name:

    result = run_policy("sjf-oracle", work, gpus(1300))   # policies.NAMES"""

from .engine import SimResult, cluster, simulate
from .las import simulate_las
from .metrics import ratios, summarize
from .policies import NAMES, run_policy
from .trace import Trace, TraceError, TraceJob, load_trace
from .workload import SimJob, Workload, derive

__all__ = ["NAMES", "SimJob", "SimResult", "Trace", "TraceError", "TraceJob", "Workload", "cluster", "derive",
           "load_trace", "ratios", "run_policy", "simulate", "simulate_las", "summarize"]
