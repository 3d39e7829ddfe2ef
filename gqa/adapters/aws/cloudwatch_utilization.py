"""GpuUtilization on CloudWatch: the mean of the `GPUUtilization` metric each
job publishes (gqa.runtime.gpu_metrics prints it as EMF; CloudWatch Logs
turns the job's log lines into the metric, dimension JobId).

One GetMetricData call asks for up to 500 jobs at once, each a MetricStat
query averaged over the whole window."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from .errors import Retrying

NAMESPACE = "gqa"
METRIC = "GPUUtilization"
DIMENSION = "JobId"
QUERIES_PER_CALL = 500     # GetMetricData's limit


class CloudWatchGpuUtilization:
    def __init__(self, client: Any, namespace: str = NAMESPACE, *, attempts: int = 5, **retry: Any):
        self.client = client
        self.namespace = namespace
        self.call = Retrying.for_service(client, "CloudWatch", attempts=attempts, **retry)

    def recent(self, job_ids: list[str], window: float, now: float) -> dict[str, float]:
        # a period that is a multiple of 60 s and covers the window: one datapoint (two, where the
        # window straddles a period boundary) per job
        period = max(60, int(math.ceil(window / 60.0)) * 60)
        start = datetime.fromtimestamp(now - window, timezone.utc)
        end = datetime.fromtimestamp(now, timezone.utc)
        out: dict[str, float] = {}
        for first in range(0, len(job_ids), QUERIES_PER_CALL):
            chunk = job_ids[first:first + QUERIES_PER_CALL]
            queries = [{"Id": f"j{i}", "ReturnData": True, "MetricStat": {
                "Metric": {"Namespace": self.namespace, "MetricName": METRIC,
                           "Dimensions": [{"Name": DIMENSION, "Value": job_id}]},
                "Period": period, "Stat": "Average"}} for i, job_id in enumerate(chunk)]
            values: dict[str, list[float]] = {}
            kwargs: dict[str, Any] = {"MetricDataQueries": queries, "StartTime": start, "EndTime": end}
            while True:
                page = self.call("GetMetricData", **kwargs)
                for result in page.get("MetricDataResults", []):
                    values.setdefault(result["Id"], []).extend(float(v) for v in result.get("Values", []))
                if not page.get("NextToken"):
                    break
                kwargs["NextToken"] = page["NextToken"]
            for i, job_id in enumerate(chunk):
                seen = values.get(f"j{i}")
                if seen:
                    out[job_id] = sum(seen) / len(seen)
        return out
