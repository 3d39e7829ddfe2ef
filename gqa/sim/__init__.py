"""Trace replay: real cluster traces through the production scheduling pass.

    trace = load_trace("raw-traces.tar.gz")           # what happened: arrivals, durations, GPUs
    work = derive(trace.jobs, cluster_gpus=1300)      # what traces lack: wall times, teams, users
    result = simulate(work, gpus(1300), preset("gqa"))
    summary = summarize(result)

Every ordering, quota, gang and backfill decision is `gqa.scheduling.plan()`'s;
this package only keeps the clock, the GPUs and the books."""

from .engine import SimResult, cluster, simulate
from .metrics import ratios, summarize
from .trace import Trace, TraceError, TraceJob, load_trace
from .workload import SimJob, Workload, derive

__all__ = ["SimJob", "SimResult", "Trace", "TraceError", "TraceJob", "Workload", "cluster", "derive",
           "load_trace", "ratios", "simulate", "summarize"]
