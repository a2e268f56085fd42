"""The runtime's platform metrics for prometheus_client: register a ``SandletCollector`` in a registry (the
default ``REGISTRY`` or your own) and an existing exporter serves sandlet's families with its own::

    from prometheus_client import REGISTRY
    from sandlet.prometheus import SandletCollector
    REGISTRY.register(SandletCollector(rt))

Each scrape asks the runtime for its metrics (``rt.metrics_json()``: the families of sandlet_metrics.h)
and turns every family into a prometheus_client metric family of the same name, type, help and samples.
prometheus_client itself is needed only by this module (``pip install prometheus_client``).
"""
from typing import Any, Iterator

from prometheus_client.core import Metric

__all__ = ["SandletCollector"]


class SandletCollector:
    """A prometheus_client collector (``collect()``) over a sandlet Runtime or AsyncRuntime."""

    def __init__(self, runtime: Any) -> None:
        # An AsyncRuntime carries its synchronous runtime: a scrape runs on the exporter's thread anyway.
        self._rt = getattr(runtime, "sync", runtime)

    def collect(self) -> Iterator[Metric]:
        for fam in self._rt.metrics_json()["families"]:
            name = fam["name"]
            # prometheus_client names a counter family without its _total suffix (it adds it back on output).
            if fam["type"] == "counter" and name.endswith("_total"):
                name = name[: -len("_total")]
            metric = Metric(name, fam["help"], fam["type"])
            for s in fam["samples"]:
                metric.add_sample(s["name"], dict(s["labels"]), float(s["value"]))
            yield metric
