"""CloudWatch metrics as EMF (embedded metric format): JSON lines on stdout
that CloudWatch Logs turns into metrics, so a Lambda function emits them with
no API call and no extra latency.

`make_metrics` returns Powertools' `Metrics` when aws_lambda_powertools is
installed (the Lambda functions ship it), else `EmfMetrics` below: a small
standard-library printer with the subset of Powertools' interface gqa uses
(add_metric, add_dimension, add_metadata, flush_metrics), so callers never
know which they got.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

MAX_METRICS = 100   # EMF's limit per document: flush on reaching it


def make_metrics(namespace: str = "gqa", service: str = "gqa") -> Any:
    try:
        from aws_lambda_powertools import Metrics
    except ImportError:
        return EmfMetrics(namespace, service)
    return Metrics(namespace=namespace, service=service)


class EmfMetrics:
    def __init__(self, namespace: str, service: str, *, out: TextIO | None = None,
                 clock: Callable[[], float] = time.time):
        self.namespace = namespace
        self.service = service
        self.dimensions: dict[str, str] = {"service": service}   # Powertools' default dimension
        self.out = out
        self.clock = clock
        self.metrics: dict[str, tuple[str, list[float]]] = {}
        self.metadata: dict[str, Any] = {}

    def add_metric(self, name: str, unit: Any, value: float) -> None:
        unit_name = getattr(unit, "value", unit)   # MetricUnit.Count or "Count"
        _, values = self.metrics.setdefault(name, (str(unit_name), []))
        values.append(float(value))
        if len(self.metrics) >= MAX_METRICS:
            self.flush_metrics()

    def add_dimension(self, name: str, value: str) -> None:
        self.dimensions[name] = str(value)

    def add_metadata(self, key: str, value: Any) -> None:
        self.metadata[key] = value

    def flush_metrics(self) -> None:
        """Print one EMF document and start afresh: metrics, metadata and added
        dimensions are cleared, the service dimension stays (as in Powertools)."""
        if not self.metrics:
            return
        document: dict[str, Any] = {
            "_aws": {"Timestamp": int(self.clock() * 1000), "CloudWatchMetrics": [{
                "Namespace": self.namespace, "Dimensions": [list(self.dimensions)],
                "Metrics": [{"Name": n, "Unit": unit} for n, (unit, _) in self.metrics.items()]}]},
            **self.dimensions, **self.metadata,
            **{n: values[0] if len(values) == 1 else values for n, (_, values) in self.metrics.items()},
        }
        print(json.dumps(document, separators=(",", ":")), file=self.out or sys.stdout, flush=True)
        self.metrics.clear()
        self.metadata.clear()
        self.dimensions = {"service": self.service}
